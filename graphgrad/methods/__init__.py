"""Attribution methods without TensorFlow: the registry, the options and reports, the NumPy algorithms."""

"""The TensorFlow side, imported lazily inside functions: the runtime, check, and TensorFlow's private API."""

"""Graph files: TensorFlow's schema, reading and atomic writing, and the fast readings of binary GraphDefs."""

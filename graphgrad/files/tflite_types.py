"""TensorFlow Lite's tensor types, as NumPy's and TensorFlow's (its DataType numbers,
written into the rebuilt GraphDef without TensorFlow)."""

import numpy as np

# TensorFlow Lite's TensorType -> (numpy dtype, TensorFlow DataType)
TYPES = {0: (np.float32, 1), 1: (np.float16, 19), 2: (np.int32, 3), 3: (np.uint8, 4), 4: (np.int64, 9),
         6: (np.bool_, 10), 7: (np.int16, 5), 9: (np.int8, 6), 10: (np.float64, 2)}
FLOAT = 1  # TensorFlow's DT_FLOAT

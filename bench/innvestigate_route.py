"""innvestigate 2.1.2 on the bench's digits CNN (bench/run.py's tf214 case), run by
the Python of the virtualenv the bench makes for the peers that need TensorFlow
below 2.15 and numpy below 2, which do not install beside graphgrad's TensorFlow.

    VENV/bin/python bench/innvestigate_route.py CNN.npz ROWS.npy OUT_FOLDER

The CNN is rebuilt in tf.keras (Keras 2) from the weights of the Keras 3 model that
cnn.pb was frozen from (CNN.npz, written by make_inputs.py). For each analyzer of
ANALYZERS, OUT_FOLDER/innvestigate_<graphgrad's method>.npy gets its attributions
of logits[:, 0] for every row; prints one JSON line: graphgrad's method -> the
median seconds of a warm call.
"""

import json
import os
import statistics
import sys
import time

# innvestigate's analyzer -> the graphgrad method it defines alike
ANALYZERS = {
    "gradient": "gradient",
    "input_t_gradient": "grad_x_input",
    "guided_backprop": "guided_backprop",
    "deconvnet": "deconvnet",
    "lrp.epsilon": "eps_lrp_layers(eps=1e-07)",
    "lrp.z_plus": "lrp_zplus",
    "lrp.alpha_2_beta_1_IB": "lrp_alpha_beta(alpha=2.0,beta=1.0)",
}
WARM_CALLS = 10


def rebuilt(weights_path: str):
    """The digits CNN in tf.keras, with the weights of ``weights_path``."""
    import numpy as np
    import tensorflow as tf

    weights = np.load(weights_path)
    layers = tf.keras.layers
    inputs = tf.keras.Input((28, 28, 1))
    h = layers.Conv2D(16, 3, activation="relu", name="conv1")(inputs)
    h = layers.MaxPooling2D(name="pool1")(h)
    h = layers.Conv2D(32, 3, activation="relu", name="conv2")(h)
    h = layers.MaxPooling2D(name="pool2")(h)
    model = tf.keras.Model(inputs, layers.Dense(10, name="dense")(layers.Flatten()(h)))
    for name in ("conv1", "conv2", "dense"):
        model.get_layer(name).set_weights([weights[f"{name}_kernel"], weights[f"{name}_bias"]])
    return model


def main():
    weights_path, rows_path, out = sys.argv[1:4]
    import numpy as np
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()  # innvestigate 2 runs in graph mode
    import innvestigate

    model, rows = rebuilt(weights_path), np.load(rows_path)
    warm = {}
    for analyzer_name, method in ANALYZERS.items():
        analyzer = innvestigate.create_analyzer(analyzer_name, model, neuron_selection_mode="index")
        np.save(os.path.join(out, f"innvestigate_{method}.npy"), analyzer.analyze(rows, neuron_selection=0))
        calls = []
        for _ in range(WARM_CALLS):
            started = time.perf_counter()
            analyzer.analyze(rows, neuron_selection=0)
            calls.append(time.perf_counter() - started)
        warm[method] = statistics.median(calls)
    print(json.dumps(warm))


if __name__ == "__main__":
    main()

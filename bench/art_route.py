"""The same L-infinity PGD as ``graphgrad attack``, by the Adversarial Robustness
Toolbox: its ``TensorFlowV2Classifier`` over the frozen graph wrapped as a function
(``tf.compat.v1.wrap_function``, as TensorFlow's guide loads a frozen graph in TF2;
the cross-entropy of the logits), its ``ProjectedGradientDescent`` with one random
start, eps / steps as given and a step of 2.5 eps / steps. A bypassed
graph carries BPDA in itself, so the same attack is BPDA there. With SEEDS, the
attack runs once per seed of NumPy's generator (ART's random start), 0 to SEEDS - 1.
With THERMOMETER (a number of levels), X is the encoded tensor and the classifier
has ART's ``ThermometerEncoding`` as its preprocessing defence, whose own gradient
estimate (Athalye et al.'s) carries the attack across it; the graph's encoding of
the images is checked equal to ART's first.
Prints a JSON line: the accuracy under attack (the mean over the seeds, and each),
and the first attack's seconds.

    python bench/art_route.py GRAPH.pb X Y IMAGES.npy LABELS.npy EPS STEPS [ART_PATH [SEEDS [THERMOMETER]]]
"""

import json
import sys
import time

import numpy as np


def main(graph_path: str, x_name: str, y_name: str, images_path: str, labels_path: str, eps: str, steps: str,
         art_path: str = "", seeds: str = "1", thermometer: str = "") -> None:
    if art_path:
        sys.path.append(art_path)
    import tensorflow as tf
    from art.attacks.evasion import ProjectedGradientDescent
    from art.estimators.classification import TensorFlowV2Classifier

    with open(graph_path, "rb") as stream:
        graph_def = tf.compat.v1.GraphDef.FromString(stream.read())
    wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
    pruned = wrapped.prune(wrapped.graph.get_tensor_by_name(x_name), wrapped.graph.get_tensor_by_name(y_name))

    def model(inputs, training=False):  # ART calls Keras models' way
        return pruned(inputs)

    images = np.load(images_path)
    classes = pruned.outputs[0].shape[-1]
    defences = []
    if thermometer:
        from art.defences.preprocessor import ThermometerEncoding

        encoding = ThermometerEncoding(clip_values=(0.0, 1.0), num_space=int(thermometer))
        graphs = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(graph_def, name=""), [])
        encode = graphs.prune(graphs.graph.get_tensor_by_name("x:0"), graphs.graph.get_tensor_by_name(x_name))
        if not np.array_equal(encode(tf.constant(images)).numpy(), encoding(images.copy())[0]):
            sys.exit("the graph's thermometer encoding is not ART's on these images")
        defences = [encoding]
    classifier = TensorFlowV2Classifier(model=model, nb_classes=classes, input_shape=images.shape[1:],
                                        loss_object=tf.keras.losses.CategoricalCrossentropy(from_logits=True),
                                        clip_values=(0.0, 1.0), preprocessing_defences=defences,
                                        preprocessing=None)
    labels = np.load(labels_path)
    radius, count = float(eps), int(steps)
    attack = ProjectedGradientDescent(classifier, norm=np.inf, eps=radius, eps_step=2.5 * radius / count,
                                      max_iter=count, num_random_init=1, batch_size=len(images), verbose=False)
    accuracies, seconds = [], []
    for seed in range(int(seeds)):
        np.random.seed(seed)
        started = time.perf_counter()
        adversarial = attack.generate(x=images, y=np.eye(classes)[labels])
        seconds.append(time.perf_counter() - started)
        accuracies.append(float((classifier.predict(adversarial).argmax(axis=1) == labels).mean()))
    print(json.dumps({"attacked_accuracy": float(np.mean(accuracies)), "each": accuracies, "seconds": seconds[0]}))


if __name__ == "__main__":
    main(*sys.argv[1:])

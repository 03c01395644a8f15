"""Build the benchmark inputs with TensorFlow (run by bench/run.py when missing).

  chain.pb   (a) a 100k-node chain of Sign, Identity, Mul, AddV2
  dense.pb   (b) a frozen-model-sized graph: 40 dense layers with Relu, ~100 MB of constants
  small/     (c) 200 small frozen graphs of about 0.9 MB (like tf2onnx's test models)
  many_nodes/ (c') 200 graphs of 8000 small nodes each: CPU-bound work for -j
  chain20k.pb  a 100k-node chain of Sign, Identity, Mul, AddV2, Neg: 20,000 Signs, for
               --embed of 20,000 nodes among 100k (python bench/make_inputs.py DIR chain20k)
  attribution.pb   an MNIST-sized classifier (784 -> 6 x 512 -> 10) through Relu, Tanh
                   and Sigmoid, scaled so that its values stay finite: for attribution
                   (python bench/make_inputs.py DIR attribution writes only this one)
  cnn.keras, cnn.pb, cnn.npz  a digits CNN (28 x 28 x 1 -> two convolutions with Relu
                   and max pooling -> 10 logits) as a Keras model, as the frozen graph
                   of the same weights, and the weights alone: for the warm calls
                   against tf-keras-vis and innvestigate (python bench/make_inputs.py DIR cnn)
  mobilenet.keras, mobilenet.pb  Keras' MobileNetV2 with random weights, likewise
                   (python bench/make_inputs.py DIR mobilenet)
  constants10000.pb, constants100000.pb  x plus one scalar constant after another, for
                   unfreeze --min-size 1 of that many weights
                   (python bench/make_inputs.py DIR constants10000)
"""

import os
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def chain(nodes: int = 100_000, negate: bool = False):
    """Groups of Sign, Identity, Mul, AddV2 (and Neg: 20k Signs in 100k nodes)."""
    graph = tf.Graph()
    with graph.as_default():
        h = v1.placeholder(tf.float32, [None, 8], name="x")
        scale = tf.constant(1.5, name="scale")
        for _ in range(nodes // (5 if negate else 4)):
            h = tf.add(tf.multiply(tf.identity(tf.sign(h)), scale), scale)
            h = tf.negative(h) if negate else h
    return graph.as_graph_def()


def dense(layers: int = 40, width: int = 790, seed: int = 0):
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        h = v1.placeholder(tf.float32, [None, width], name="x")
        for index in range(layers):
            with tf.name_scope(f"dense{index}"):
                w = tf.constant(rng.standard_normal((width, width), dtype=np.float32), name="kernel")
                b = tf.constant(rng.standard_normal(width, dtype=np.float32), name="bias")
                h = tf.nn.relu(tf.nn.bias_add(tf.matmul(h, w), b))
        tf.identity(h, name="out")
    return graph.as_graph_def()


def small(index: int):
    rng = np.random.default_rng(index)
    graph = tf.Graph()
    with graph.as_default():
        h = v1.placeholder(tf.float32, [None, 96], name="x")
        for layer in range(24):
            w = tf.constant(rng.standard_normal((96, 96), dtype=np.float32), name=f"w{layer}")
            h = tf.sign(tf.matmul(h, w))
        tf.identity(h, name="out")
    return graph.as_graph_def()


def many_nodes(index: int, nodes: int = 8000):
    graph = tf.Graph()
    with graph.as_default():
        h = v1.placeholder(tf.float32, [None, 4], name="x")
        scale = tf.constant(float(index), name="scale")
        for _ in range(nodes // 2):
            h = tf.multiply(tf.sign(h), scale)
    return graph.as_graph_def()


def attribution_net(width: int = 512, seed: int = 3):
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        h = v1.placeholder(tf.float32, [None, 784], name="x")
        size = 784
        for index, activation in enumerate([tf.nn.relu, tf.tanh, tf.nn.relu, tf.sigmoid, tf.nn.relu, tf.tanh]):
            with tf.name_scope(f"layer{index}"):
                w = tf.constant((rng.standard_normal((size, width)) * np.sqrt(2 / size)).astype(np.float32), name="w")
                h = activation(tf.matmul(h, w))
            size = width
        out = (rng.standard_normal((size, 10)) / np.sqrt(size)).astype(np.float32)
        tf.matmul(h, tf.constant(out), name="logits")
    return graph.as_graph_def()


def write(path, graph_def):
    with open(path, "wb") as stream:
        stream.write(graph_def.SerializeToString())


def main(directory):
    for folder in ("small", "many_nodes"):
        os.makedirs(os.path.join(directory, folder), exist_ok=True)
    write(os.path.join(directory, "chain.pb"), chain())
    write(os.path.join(directory, "dense.pb"), dense())
    for index in range(200):
        write(os.path.join(directory, "small", f"model{index:03d}.pb"), small(index))
    for index in range(200):
        write(os.path.join(directory, "many_nodes", f"model{index:03d}.pb"), many_nodes(index))


def nested_calls(depth: int):
    """tf.functions each calling the next, ``depth`` deep: y = 2 sin(x) + depth."""
    graph = tf.Graph()
    with graph.as_default():
        function = tf.function(lambda t: tf.sin(t) * 2.0)
        for _ in range(depth):
            function = tf.function(lambda t, inner=function: inner(t) + 1.0)
        x = v1.placeholder(tf.float32, [3], name="x")
        tf.identity(function(x), name="y")
    return graph.as_graph_def()


def call_chain(depth: int, signs_everywhere: bool = True):
    """A GraphDef, written field by field, whose functions each call the next and
    hold a Sign (``signs_everywhere``), or whose innermost function alone holds one."""
    graph = tf.compat.v1.GraphDef()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
    for index in range(depth):
        function = graph.library.function.add()
        function.signature.name = f"f{index}"
        function.signature.input_arg.add(name="t", type=1)
        function.signature.output_arg.add(name="out", type=1)
        has_sign = signs_everywhere or not index
        if has_sign:
            sign = function.node_def.add(name="sign", op="Sign", input=["t"])
            sign.attr["T"].type = 1
        if index:
            call = function.node_def.add(name="call", op="PartitionedCall", input=["sign:y:0" if has_sign else "t"])
            call.attr["f"].func.name = f"f{index - 1}"
            call.attr["Tin"].list.type.append(1)
            call.attr["Tout"].list.type.append(1)
        function.ret["out"] = "call:output:0" if index else "sign:y:0"
    call = graph.node.add(name="y", op="PartitionedCall", input=["x"])
    call.attr["f"].func.name = f"f{depth - 1}"
    call.attr["Tin"].list.type.append(1)
    call.attr["Tout"].list.type.append(1)
    return graph


def inception_like(blocks: int = 250):
    """About 25,000 nodes in name scopes, as an Inception's graph holds them: each
    block four branches of convolutions (Conv2D, BiasAdd, Relu, their weights) joined
    by a ConcatV2, written field by field (no layout of a real net is needed: show
    and ops read names, op types and inputs)."""
    graph = tf.compat.v1.GraphDef()
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
    h = "x"
    for block in range(blocks):
        ends = []
        for branch in range(4):
            t = h
            for layer in range(5):
                scope = f"mixed_{block}/branch_{branch}/conv_{layer}"
                for const in ("weights", "bias"):
                    node = graph.node.add(name=f"{scope}/{const}", op="Const")
                    node.attr["dtype"].type = 1
                graph.node.add(name=f"{scope}/Conv2D", op="Conv2D", input=[t, f"{scope}/weights"])
                graph.node.add(name=f"{scope}/BiasAdd", op="BiasAdd", input=[f"{scope}/Conv2D", f"{scope}/bias"])
                t = graph.node.add(name=f"{scope}/Relu", op="Relu", input=[f"{scope}/BiasAdd"]).name
            ends.append(t)
        axis = graph.node.add(name=f"mixed_{block}/axis", op="Const")
        axis.attr["dtype"].type = 3
        h = graph.node.add(name=f"mixed_{block}/concat", op="ConcatV2", input=ends + [f"mixed_{block}/axis"]).name
    graph.node.add(name="logits", op="Identity", input=[h])
    return graph


def cnn(directory: str, seed: int = 5):
    """The digits CNN as ``cnn.keras``, frozen as ``cnn.pb``, and its weights as ``cnn.npz``."""
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((28, 28, 1))
    h = keras.layers.Conv2D(16, 3, activation="relu", name="conv1")(inputs)
    h = keras.layers.MaxPooling2D(name="pool1")(h)
    h = keras.layers.Conv2D(32, 3, activation="relu", name="conv2")(h)
    h = keras.layers.MaxPooling2D(name="pool2")(h)
    model = keras.Model(inputs, keras.layers.Dense(10, name="dense")(keras.layers.Flatten()(h)))
    keras_and_frozen(model, os.path.join(directory, "cnn"))
    # the weights alone, for innvestigate's Keras 2 (bench/innvestigate_route.py rebuilds the model)
    np.savez(os.path.join(directory, "cnn.npz"), **{
        f"{name}_{part}": value for name in ("conv1", "conv2", "dense")
        for part, value in zip(("kernel", "bias"), model.get_layer(name).get_weights())})


def mobilenet(directory: str, seed: int = 5):
    """Keras' MobileNetV2 (224 x 224 x 3 -> 1000 logits, random weights: nothing is
    downloaded, its batch normalisations calibrated on random images) as
    ``mobilenet.keras`` and, frozen, ``mobilenet.pb``."""
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.applications.MobileNetV2(weights=None, classifier_activation=None)
    # Random kernels shrink the activations layer after layer (to 1e-11 at the logits): each batch
    # normalisation gets its input's mean and variance on random images, as training would give it.
    images = np.random.default_rng(seed).uniform(-1, 1, (16, 224, 224, 3)).astype(np.float32)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            inputs = keras.Model(model.input, layer.input).predict(images, verbose=0)
            gamma, beta, _, _ = layer.get_weights()
            layer.set_weights([gamma, beta, inputs.mean(axis=(0, 1, 2)), inputs.var(axis=(0, 1, 2))])
    keras_and_frozen(model, os.path.join(directory, "mobilenet"))


def mobilenet_tflite(directory: str):
    """The same MobileNetV2 (``mobilenet.keras``) as TensorFlow Lite, float16 weights:
    ``mobilenet.tflite`` (7 MB), to read beside ``mobilenet.pb``."""
    import keras

    model = keras.models.load_model(os.path.join(directory, "mobilenet.keras"))
    exported = os.path.join(directory, "mobilenet_saved")
    model.export(exported, verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(exported)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
    with open(os.path.join(directory, "mobilenet.tflite"), "wb") as stream:
        stream.write(converter.convert())


def constants(count: int):
    """x + c0 + c1 + ...: ``count`` scalar float constants in a chain of AddV2."""
    graph = tf.Graph()
    with graph.as_default():
        h = v1.placeholder(tf.float32, [None], name="x")
        for index in range(count):
            h = tf.add(h, tf.constant(0.5, name=f"c{index}"))
    return graph.as_graph_def()


def keras_and_frozen(model, prefix: str):
    """``model`` saved as ``PREFIX.keras``, and its inference graph with the weights
    folded in (x: ``x``, logits: ``logits``) as ``PREFIX.pb``."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    model.save(prefix + ".keras")

    @tf.function(input_signature=[tf.TensorSpec([None, *model.input_shape[1:]], tf.float32, name="x")])
    def forward(x):
        return tf.identity(model(x, training=False), name="logits")

    write(prefix + ".pb", convert_variables_to_constants_v2(forward.get_concrete_function()).graph.as_graph_def())


if __name__ == "__main__":
    if sys.argv[2:] == ["nested"]:
        for depth in (6, 12):
            write(os.path.join(sys.argv[1], f"nested{depth}.pb"), nested_calls(depth))
    elif sys.argv[2:] == ["attribution"]:
        write(os.path.join(sys.argv[1], "attribution.pb"), attribution_net())
    elif sys.argv[2:] == ["inception_like"]:
        write(os.path.join(sys.argv[1], "inception_like.pb"), inception_like())
    elif sys.argv[2:] == ["calls10k"]:
        write(os.path.join(sys.argv[1], "calls10k.pb"), call_chain(10_000))
        write(os.path.join(sys.argv[1], "calls10k_bottom.pb"), call_chain(10_000, signs_everywhere=False))
    elif sys.argv[2:] == ["cnn"]:
        cnn(sys.argv[1])
    elif sys.argv[2:] == ["mobilenet"]:
        mobilenet(sys.argv[1])
    elif sys.argv[2:] == ["mobilenet_tflite"]:
        mobilenet_tflite(sys.argv[1])
    elif sys.argv[2:3] and sys.argv[2].startswith("constants"):
        write(os.path.join(sys.argv[1], f"{sys.argv[2]}.pb"), constants(int(sys.argv[2][len("constants"):])))
    elif sys.argv[2:] == ["chain20k"]:
        write(os.path.join(sys.argv[1], "chain20k.pb"), chain(negate=True))
    else:
        main(sys.argv[1])

"""attack never certifies a masked gradient as robustness (issue 47, point 1): the
bundled digits CNN behind defences whose TensorFlow gradient is zero, not None (a
bit-depth quantiser written as x - FloorMod(x, 1/7), a Sign binarisation), is
found masked by the gradient's value; the report says the figure is no
evaluation, exits 3, and names where the gradient is usable again; the bypass it
prints, followed, makes the attack an evaluation again."""

import json

import numpy as np
import pytest

from conftest import fixture, run_cli
from tf_helpers import graph_file, tf, v1


def _defended(tmp_path, defence, name):
    """The digits CNN with ``defence(x)`` in front of it, as a frozen GraphDef."""
    classifier = v1.GraphDef.FromString(open(fixture("digits_cnn.pb"), "rb").read())
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        with tf.name_scope("defence"):
            squeezed = tf.identity(defence(x), name="squeezed")
        tf.import_graph_def(classifier, input_map={"x:0": squeezed}, name="classifier")
    path = tmp_path / f"{name}.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


DEFENCES = {
    "floormod": lambda x: x - tf.math.floormod(x, 1.0 / 7),  # 3 bits, its gradient exactly 0
    "sign": lambda x: (tf.sign(x - 0.5) + 1.0) / 2.0,  # binarised: Sign's gradient is 0
}


def _attack(model, *args, expect):
    result = run_cli("attack", model, "--y", "classifier/logits", "--input", fixture("digits_test_images.npy"),
                     "--labels", fixture("digits_test_labels.npy"), "--eps", "0.3", "--steps", "20", *args,
                     expect=expect)
    return result


@pytest.mark.parametrize("name", sorted(DEFENCES))
def test_a_zero_gradient_is_not_reported_as_robustness_and_its_fix_works(tmp_path, name):
    model = _defended(tmp_path, DEFENCES[name], name)
    masked = _attack(model, "--json", expect=3)
    report = json.loads(masked.stdout)
    assert report["valid"] is False and report["masked_images"] > 0.5 and report["blockers"] == []
    assert report["masked_at"].startswith("defence/"), report  # where the gradient is usable again
    text = _attack(model, expect=3).stdout
    assert "not valid: the gradient is masked" in text
    [fix] = [line.split("fix: ", 1)[1] for line in text.splitlines() if "fix: " in line]
    assert fix.startswith("graphgrad bypass ") and ", then attack BPDA.pb" in fix
    bypass = fix.split(", then")[0].split()[2:]  # the printed command, followed
    bypass[bypass.index("-o") + 1] = str(tmp_path / "bpda.pb")
    run_cli("bypass", *bypass)
    broken = json.loads(_attack(tmp_path / "bpda.pb", "--json", expect=0).stdout)
    assert broken["valid"] is True and broken["masked_images"] == 0.0
    # binarised pixels 0.3 from the threshold cannot cross it: some robustness is real there
    assert broken["attacked_accuracy"] < (0.1 if name == "floormod" else 0.3) < broken["clean_accuracy"]


def test_an_undefended_model_is_an_evaluation(tmp_path):
    report = json.loads(run_cli("attack", fixture("digits_cnn.pb"), "--y", "logits", "--input",
                                fixture("digits_test_images.npy"), "--labels", fixture("digits_test_labels.npy"),
                                "--eps", "0.05", "--steps", "5", "--json").stdout)
    assert report["valid"] is True and report["masked_images"] < 0.5


FIXTURES_WITH_BLOCKERS = {  # fixture: (y, the --feed it needs)
    "digits_bit_depth.pb": "classifier/logits",
    "binary_net.pb": "dense2/logits",
}


@pytest.mark.parametrize("name", sorted(FIXTURES_WITH_BLOCKERS))
def test_every_fix_check_prints_on_the_fixtures_is_followed_and_works(tmp_path, name):
    """check's fixes, run as printed (OUT named), leave a usable gradient; on the
    bit-depth defence the result is then an attack that breaks it (a clip-1 ste on
    a rounding of 7x, the fix once printed, left it 96% "robust")."""
    import shlex

    y = FIXTURES_WITH_BLOCKERS[name]
    model = str(tmp_path / name)
    with open(fixture(name), "rb") as source, open(model, "wb") as copy:
        copy.write(source.read())
    followed = 0
    for _ in range(6):  # one fix a round, as printed for the model of that round
        report = json.loads(run_cli("check", model, "--y", y, "--json", expect=None).stdout)
        if report["gradients"][0]["status"] == "finite":
            break
        assert report["blockers"], report
        words = shlex.split(report["blockers"][0]["fix"])
        assert words[:3] == ["graphgrad", "rewrite", model] and words[-2:] == ["-o", "OUT"], words
        followed += 1
        model = str(tmp_path / f"fixed{followed}.pb")
        run_cli(*words[1:-1], model)
    assert followed and report["gradients"][0]["status"] == "finite", report
    if name == "digits_bit_depth.pb":
        attacked = json.loads(_attack(model, "--json", expect=0).stdout)
        assert attacked["valid"] and attacked["attacked_accuracy"] < 0.1


def _jpeg(x):
    """A real JPEG coding of each image at quality 75, in a tf.map_fn (a While loop
    over TensorLists): uint8 casts and the codec, whose gradient is zero."""
    def one(image):
        pixels = tf.cast(tf.clip_by_value(image * 255.0, 0.0, 255.0), tf.uint8)
        return tf.cast(tf.io.decode_jpeg(tf.io.encode_jpeg(pixels, quality=75)), tf.float32) / 255.0

    return tf.map_fn(one, x, fn_output_signature=tf.float32)


def _thermometer(x):
    """ART's ThermometerEncoding (16 levels, level k on where x > k/16) read back to
    one channel by a 1x1 convolution of unequal positive weights."""
    encoded = tf.cast(x > tf.constant(np.arange(16, dtype=np.float32) / 16), tf.float32)
    weights = np.random.default_rng(3).uniform(0.5, 1.5, [1, 1, 16, 1]).astype(np.float32)
    return tf.nn.conv2d(encoded, tf.constant(weights / weights.sum()), 1, "SAME")


def _median(x):
    """A 3-bit depth reduction, then a 3x3 median filter (Xu et al.'s stacked squeezers)."""
    rounded = tf.round(x * 7) / 7
    padded = tf.pad(rounded, [[0, 0], [1, 1], [1, 1], [0, 0]], "REFLECT")
    patches = tf.image.extract_patches(padded, [1, 3, 3, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    return tf.sort(patches, axis=-1)[..., 4:5]


_MASK = np.where(np.random.default_rng(0).random([1, 8, 8, 1]) < 0.5, -1.0, 1.0).astype(np.float32)


def _sign_mask(x):
    """x - FloorMod(x, 1/7), times a fixed +-1 mask, undone by the same mask (a red
    team's): a bypass ending at the masked image would scramble the gradient's signs."""
    return (x - tf.math.floormod(x, 1.0 / 7)) * tf.constant(_MASK) * tf.identity(tf.constant(_MASK))


def _inverted(x):
    """The quantised image inverted, then inverted back (a red team's): a bypass ending
    at the inverted image would carry the gradient with the wrong sign."""
    inverted = 1.0 - (x - tf.math.floormod(x, 1.0 / 7))
    return tf.ones_like(inverted) - inverted


def _soft_binarised(x):
    """A sigmoid of slope 400 at 0.5, then an 8-bit quantiser (a red team's): the
    sigmoid's gradient underflows at most pixels, so a bypass starting after it would
    leave the gradient dead; the advice starts at x."""
    binarised = tf.sigmoid(400 * (x - 0.5))
    return binarised - tf.math.floormod(binarised, 1.0 / 255)


BROKEN_BY_THE_ADVICE = {"jpeg": _jpeg, "thermometer": _thermometer, "median": _median, "sign_mask": _sign_mask,
                        "inverted": _inverted, "soft_sign": _soft_binarised, **DEFENCES}
BINARISED = {"sign", "soft_sign"}  # pixels 0.3 from the threshold cannot cross it: some robustness is real


@pytest.mark.parametrize("name", sorted(BROKEN_BY_THE_ADVICE))
def test_checks_advice_followed_from_the_file_alone_breaks_each_defence(tmp_path, name):
    """The workflow as a user runs it, on defences built with TensorFlow: check, the
    fix it prints run as printed (OUT named), until check is ok; then attack at eps
    0.3 is an evaluation and brings the defence below 10% (a binarisation, whose
    pixels 0.3 from the threshold cannot cross it, below 30%)."""
    import shlex

    model = str(_defended(tmp_path, BROKEN_BY_THE_ADVICE[name], name))
    for round_ in range(3):
        report = json.loads(run_cli("check", model, "--y", "classifier/logits", "--json", expect=None).stdout)
        if report["gradients"][0]["status"] == "finite":
            break
        fixes = [item["fix"] for item in report["blockers"] + report["masked"]]
        assert fixes, report
        words = shlex.split(fixes[0][fixes[0].index("graphgrad "):])
        assert words[-2:] == ["-o", "OUT"], words
        model = str(tmp_path / f"fixed{round_}.pb")
        run_cli(*words[1:-1], model)
    assert report["gradients"][0]["status"] == "finite", report
    attacked = json.loads(_attack(model, "--json", expect=0).stdout)
    assert attacked["valid"] and attacked["attacked_accuracy"] < (0.3 if name in BINARISED else 0.1), attacked


def _noisy(x):
    """Gaussian noise and a random brightness shift, drawn at every run (a one-pixel
    roll of an 8x8 digit would cost the undefended classifier its clean accuracy)."""
    shift = tf.random.uniform([tf.shape(x)[0], 1, 1, 1], -0.1, 0.1)
    return tf.clip_by_value(x + shift + tf.random.normal(tf.shape(x), stddev=0.1), 0.0, 1.0)


def test_randomness_is_named_and_judged_over_runs_and_eot_breaks_it(tmp_path):
    model = _defended(tmp_path, _noisy, "noisy")
    checked = json.loads(run_cli("check", model, "--y", "classifier/logits", "--json", expect=None).stdout)
    assert any("random numbers at every run" in note and "--eot" in note for note in checked["notes"])
    one_draw = _attack(model, "--json", expect=0)
    report = json.loads(one_draw.stdout)
    assert report["random"] and report["judge_runs"] == 10 and report["eot"] == 1
    text = _attack(model, expect=0).stdout
    assert "draws other random numbers at every run" in text and "give --eot N" in text
    averaged = json.loads(_attack(model, "--eot", "10", "--steps", "40", "--json", expect=0).stdout)
    assert averaged["valid"] and averaged["judge_runs"] == 10 and averaged["attacked_accuracy"] < 0.1


def _reversed(x):
    """Forward the identity, backward minus three times the gradient: a gradient
    that is usable everywhere and leads the attack the wrong way (obfuscated, not
    masked), which no test of zeros finds."""
    return -2.0 * x + tf.stop_gradient(3.0 * x)


def test_a_misleading_gradient_fails_the_checklist_and_is_no_evaluation(tmp_path):
    model = _defended(tmp_path, _reversed, "reversed")
    report = json.loads(_attack(model, "--json", expect=3).stdout)
    verdicts = {item["name"]: item["passed"] for item in report["checklist"]}
    assert report["masked_images"] == 0.0 and verdicts["gradient"]  # not masked...
    assert not verdicts["unbounded"] and not verdicts["noise"]  # ... and still no evaluation
    assert report["valid"] is False and report["attacked_accuracy"] > 0.9
    text = _attack(model, expect=3).stdout
    assert "FAIL  unbounded" in text and "not valid" in text


def test_the_checklist_passes_on_a_broken_defence(tmp_path):
    bypassed = tmp_path / "bpda.pb"
    run_cli("bypass", fixture("digits_bit_depth.pb"), "--from", "x:0", "--to", "defence/squeezed:0", "-o", bypassed)
    report = json.loads(_attack(bypassed, "--steps", "40", "--json", expect=0).stdout)
    names = ["gradient", "convergence", "noise", "slope", "walk", "gradient-free", "eps", "unbounded", "bypass"]
    assert [item["name"] for item in report["checklist"]] == names
    assert all(item["passed"] for item in report["checklist"]), report["checklist"]


def test_an_identity_across_a_thermometer_encoding_is_refused_before_it_runs_and_its_advice_works(tmp_path):
    """A thermometer encoding (16 levels: [n, 8, 8, 1] in, [n, 8, 8, 16] out) in a
    frozen graph that records no shapes: bypass writes the identity across it, and
    every command that runs the result refuses it in one line, naming both shapes
    and the surrogate that maps one onto the other, instead of failing each run on
    a reshape; followed (reset, bypass with it), check is ok."""
    def build():
        x = v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        levels = tf.constant(np.arange(16, dtype=np.float32) / 16)
        encoded = tf.cast(x > levels, tf.float32, name="thermometer")
        kernel = tf.constant(np.random.default_rng(0).normal(size=[3, 3, 16, 4]).astype(np.float32))
        hidden = tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(encoded, kernel, 1, "SAME")), [1, 2])
        tf.matmul(hidden, tf.constant(np.eye(4, 3, dtype=np.float32)), name="logits")

    model = graph_file(tmp_path, build, "thermometer.pb")
    run_cli("bypass", model, "--from", "x:0", "--to", "thermometer:0", "-o", tmp_path / "bpda.pb")
    result = run_cli("check", tmp_path / "bpda.pb", "--x", "x", "--y", "logits", expect=1)
    [line] = result.stderr.strip().splitlines()
    assert "[-1, 8, 8, 16] back to x, of shape [-1, 8, 8, 1], through identity" in line, line
    advice = line.split("bypass again with ")[1]
    assert advice == "--surrogate 'thermometer(levels=16)'"
    run_cli("reset", tmp_path / "bpda.pb", "-o", tmp_path / "plain.pb")
    run_cli("bypass", tmp_path / "plain.pb", "--from", "x:0", "--to", "thermometer:0", "--surrogate",
            "thermometer(levels=16)", "-o", tmp_path / "soft.pb")
    assert run_cli("check", tmp_path / "soft.pb", "--x", "x", "--y", "logits").stdout.endswith("ok\n")


def test_after_a_bypass_check_and_show_agree_that_nothing_blocks(tmp_path):
    """The bit-depth defence bypassed: its Round lies behind the bypass's
    StopGradient, where no gradient is taken; check no longer lists it (with a fix)
    under ok, and check --html draws no blocker, as show draws none."""
    bypassed = tmp_path / "bpda.pb"
    run_cli("bypass", fixture("digits_bit_depth.pb"), "--from", "x:0", "--to", "defence/squeezed:0", "-o", bypassed)
    report = json.loads(run_cli("check", bypassed, "--y", "classifier/logits", "--json").stdout)
    assert report["blockers"] == [] and report["gradients"][0]["status"] == "finite"
    run_cli("check", bypassed, "--y", "classifier/logits", "--html", tmp_path / "checked.html")
    run_cli("show", bypassed, "--y", "classifier/logits", "-o", tmp_path / "shown.dot")
    blocker_colour = "#d62728"  # what show and check --html fill a blocker with
    assert blocker_colour not in (tmp_path / "checked.html").read_text()
    shown = (tmp_path / "shown.dot").read_text()
    assert blocker_colour not in shown
    # the bypass one box saying what it is, not the stop-gradient arithmetic it is made of
    boxes = [line for line in shown.splitlines() if "graphgrad_bypass" in line and "->" not in line]
    assert len(boxes) == 1 and 'label="bypass from x' in boxes[0], boxes
    run_cli("check", fixture("digits_bit_depth.pb"), "--y", "classifier/logits", "--html", tmp_path / "before.html",
            expect=1)
    assert blocker_colour in (tmp_path / "before.html").read_text()  # before the bypass, it is drawn


def test_shape_reads_are_never_blockers_and_the_fix_is_the_region_to_bypass(tmp_path):
    """A defence that casts to integers, then a Flatten written with tf.shape: the
    Shape reads no values (its None gradient is right), so only the cast is a
    blocker, and its bypass is the cast's own region (from x * 7 to the cast back),
    not the Flatten's Reshape (which would skip the whole conv stack); followed, check
    is ok."""
    def build():
        x = v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        quantised = tf.cast(tf.cast(x * 7, tf.int32), tf.float32) / 7
        squeezed = tf.identity(quantised, name="defence/squeezed")
        kernel = tf.constant(np.random.default_rng(0).normal(size=[3, 3, 1, 4]).astype(np.float32))
        hidden = tf.nn.relu(tf.nn.conv2d(squeezed, kernel, 1, "SAME"))
        flat = tf.reshape(hidden, [tf.shape(hidden)[0], -1], name="flatten")
        tf.matmul(flat, tf.constant(np.ones([256, 3], np.float32)), name="logits")

    model = graph_file(tmp_path, build, "cast.pb")
    report = json.loads(run_cli("check", model, "--x", "x", "--y", "logits", "--json", expect=1).stdout)
    assert [blocker["op_type"] for blocker in report["blockers"]] == ["Cast"], report["blockers"]
    fix = report["blockers"][0]["fix"]
    assert "--from mul:0 --to Cast_1:0 -o OUT" in fix, fix
    words = fix[fix.index("graphgrad "):].split()
    run_cli(*words[1:-1], tmp_path / "bpda.pb")
    assert run_cli("check", tmp_path / "bpda.pb", "--x", "x", "--y", "logits").stdout.endswith("ok\n")


def _reversed_near_the_data(x):
    """Forward the identity; backward the identity far from the data and its
    opposite near it (told by the images' high-frequency energy): PGD near the data
    climbs back to the true class, a probe that starts at a random point across the
    range meets an honest gradient (a red team's defence)."""
    padded = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")
    energy = tf.reduce_mean(tf.abs(x - tf.nn.avg_pool2d(padded, 3, 1, "VALID")), axis=[1, 2, 3], keepdims=True)
    sign = tf.stop_gradient(tf.where(energy > 0.25, tf.ones_like(energy), -tf.ones_like(energy)))
    return tf.stop_gradient(x) + sign * (x - tf.stop_gradient(x))


def test_a_gradient_that_misleads_only_near_the_data_is_no_evaluation(tmp_path):
    model = _defended(tmp_path, _reversed_near_the_data, "near")
    report = json.loads(_attack(model, "--json", expect=3).stdout)
    verdicts = {item["name"]: item["passed"] for item in report["checklist"]}
    assert report["attacked_accuracy"] > 0.9 and report["valid"] is False
    assert not verdicts["noise"] and not verdicts["unbounded"]  # noise beats it; from the images, chance is not met
    run_cli("bypass", model, "--from", "x:0", "--to", "defence/squeezed:0", "-o", tmp_path / "bpda.pb")
    broken = json.loads(_attack(tmp_path / "bpda.pb", "--json", expect=0).stdout)
    assert broken["valid"] and broken["attacked_accuracy"] < 0.1


def _scrambled(x):
    """A quantiser's zero gradient with a tiny term of scrambled signs left on top (a
    red team's): usable by value, useless in direction, so plain PGD leaves 84%."""
    tiny = 1e-6 * tf.constant(_MASK) * x
    return x - tf.math.floormod(x, 1.0 / 7) + (tiny - tf.stop_gradient(tiny))


def test_a_gradient_that_is_not_the_losss_slope_is_no_evaluation(tmp_path):
    model = _defended(tmp_path, _scrambled, "scrambled")
    report = json.loads(_attack(model, "--json", expect=3).stdout)
    verdicts = {item["name"]: item["passed"] for item in report["checklist"]}
    assert report["attacked_accuracy"] > 0.5 and report["masked_images"] == 0.0 and not verdicts["slope"], report
    run_cli("bypass", model, "--from", "x:0", "--to", "defence/squeezed:0", "-o", tmp_path / "bpda.pb")
    broken = json.loads(_attack(tmp_path / "bpda.pb", "--json", expect=0).stdout)
    assert broken["valid"] and broken["attacked_accuracy"] < 0.1


def test_a_mask_inside_the_classifier_is_bypassed_where_it_is(tmp_path):
    """x - FloorMod(x, 1/4) on the first layer's ReLU, inside the classifier (a red
    team's): the bypass the advice names starts at that ReLU, not at x (an identity
    from x across a layer would stand in for the layer), and breaks the model."""
    from tensorflow.python.framework import tensor_util

    import shlex

    classifier = v1.GraphDef.FromString(open(fixture("digits_cnn.pb"), "rb").read())
    weights = {node.name: tensor_util.MakeNdarray(node.attr["value"].tensor) for node in classifier.node
               if node.op == "Const"}

    def build():
        x = v1.placeholder(tf.float32, [None, 8, 8, 1], name="x")
        hidden = tf.nn.relu(tf.nn.conv2d(x, weights["conv1/kernel"], 1, "SAME") + weights["conv1/bias"], name="relu")
        hidden = tf.identity(hidden - tf.math.floormod(hidden, 0.25), name="defence/squeezed")
        hidden = tf.nn.relu(tf.nn.conv2d(hidden, weights["conv2/kernel"], 1, "SAME") + weights["conv2/bias"])
        flat = tf.reshape(tf.nn.max_pool2d(hidden, 2, 2, "VALID"), weights["flat/shape"])
        tf.identity(tf.matmul(flat, weights["dense/kernel"]) + weights["dense/bias"], name="classifier/logits")

    model = graph_file(tmp_path, build, "inside.pb")
    report = json.loads(run_cli("check", model, "--x", "x", "--y", "classifier/logits", "--json", expect=1).stdout)
    [masked] = report["masked"]
    words = shlex.split(masked["fix"])
    assert words[words.index("--from") + 1] == "relu:0", words
    run_cli(*words[1:-1], tmp_path / "bpda.pb")
    broken = json.loads(_attack(tmp_path / "bpda.pb", "--json", expect=0).stdout)
    assert broken["valid"] and broken["attacked_accuracy"] < 0.1


def _falling_thermometer(x):
    """Level k on where x <= k/16, read back by weights of -1/16 plus 1 (a red team's):
    the soft thermometer rises where these levels fall."""
    encoded = tf.cast(x <= tf.constant(np.arange(16, dtype=np.float32) / 16), tf.float32)
    return 1.0 + tf.nn.conv2d(encoded, tf.constant(-np.ones([1, 1, 16, 1], np.float32) / 16), 1, "SAME")


def test_an_encoding_the_soft_thermometer_does_not_follow_gets_the_advice_to_write_ones_own(tmp_path):
    """The shapes are a thermometer's, the values go the other way: check proposes no
    thermometer (which would reverse the gradient) but the user's own g, and that
    advice, followed with a falling soft thermometer, breaks the model."""
    import shlex

    model = _defended(tmp_path, _falling_thermometer, "falling")
    report = json.loads(run_cli("check", model, "--y", "classifier/logits", "--json", expect=1).stdout)
    fix = report["blockers"][0]["fix"]
    assert "--surrogate-function FILE.py:NAME" in fix and "thermometer(levels=16)'s values correlate -" in fix, fix
    (tmp_path / "falling_g.py").write_text(
        "import numpy as np\nimport tensorflow as tf\n\n\ndef soft(x):\n"
        "    return tf.sigmoid((np.arange(16, dtype=np.float32) / 16 - x) / 0.05)\n")
    words = shlex.split(fix[fix.index("graphgrad "):].replace("FILE.py:NAME", f"{tmp_path / 'falling_g.py'}:soft"))
    run_cli(*words[1:-1], tmp_path / "bpda.pb")
    broken = json.loads(_attack(tmp_path / "bpda.pb", "--json", expect=0).stdout)
    assert broken["valid"] and broken["attacked_accuracy"] < 0.1


def _half_flipped(x):
    """An 8-bit quantiser on an image whose masked half is inverted, then inverted back
    (a red team's): the identity across the quantiser's region from x is no
    approximation of it (its values correlate with x's near 0)."""
    mask = tf.constant((_MASK > 0).astype(np.float32))
    flipped = mask * x + (1 - mask) * (1 - x)
    quantised = flipped - tf.math.floormod(flipped, 1.0 / 255)
    return mask * quantised + (1 - mask) * (1 - quantised)


def test_a_bypass_that_does_not_approximate_its_region_makes_the_attack_no_evaluation(tmp_path):
    """The identity written from x across the inversion and the quantiser (a region it
    does not approximate: its values correlate with x's near 0) makes PGD follow a
    scrambled gradient: attack's bypass check fails and the figure is not valid. Its
    own advice, the smallest region (from the inverted image to its quantisation),
    followed, breaks the defence."""
    model = _defended(tmp_path, _half_flipped, "flipped")
    advice = json.loads(_attack(model, "--json", expect=3).stdout)["fix"]
    run_cli("bypass", model, "--from", "x:0", "--to", "defence/sub_2:0", "-o", tmp_path / "wrong.pb")
    wrong = json.loads(_attack(tmp_path / "wrong.pb", "--json", expect=3).stdout)
    [item] = [item for item in wrong["checklist"] if item["name"] == "bypass"]
    assert not item["passed"] and wrong["attacked_accuracy"] > 0.5, wrong
    words = advice.split(", then")[0].split()
    run_cli(*words[1:-1], tmp_path / "right.pb")
    right = json.loads(_attack(tmp_path / "right.pb", "--json", expect=0).stdout)
    assert right["valid"] and right["attacked_accuracy"] < 0.1


def test_an_attack_that_reaches_chance_is_an_evaluation_whatever_its_checks_say(tmp_path):
    """The undefended CNN in 10 large steps: its saturated softmax's tiny gradient at
    the clean images once failed the slope check; a figure at chance cannot overstate
    robustness."""
    report = json.loads(run_cli("attack", fixture("digits_cnn.pb"), "--y", "logits", "--input",
                                fixture("digits_test_images.npy"), "--labels", fixture("digits_test_labels.npy"),
                                "--eps", "0.3", "--steps", "10", "--json").stdout)
    assert report["valid"] and report["attacked_accuracy"] <= 0.2


def _shattered(x):
    """Within 0.005 of x, its derivative 1 + 3 cos(200 pi x) of a pseudo-random sign
    on each pixel (a red team's): nothing masked, the local slope honest, PGD 93%."""
    return x + 3.0 * tf.sin(2 * np.pi * 100 * x) / (2 * np.pi * 100)


def _scrambled_at_scale_one(x):
    """A quantiser's zero gradient with a scrambled term of full scale on top (a red
    team's): the slope check's ratio is near 1, PGD 84%."""
    term = tf.constant(_MASK) * x
    return x - tf.math.floormod(x, 1.0 / 7) + (term - tf.stop_gradient(term))


@pytest.mark.parametrize("defence", [_shattered, _scrambled_at_scale_one], ids=["shattered", "scrambled"])
def test_an_attack_a_gradient_free_one_beats_is_no_evaluation(tmp_path, defence):
    model = _defended(tmp_path, defence, "misled")
    report = json.loads(_attack(model, "--json", expect=3).stdout)
    verdicts = {item["name"]: item["passed"] for item in report["checklist"]}
    assert report["attacked_accuracy"] > 0.5 and not verdicts["gradient-free"], report["checklist"]
    run_cli("bypass", model, "--from", "x:0", "--to", "defence/squeezed:0", "-o", tmp_path / "bpda.pb")
    broken = json.loads(_attack(tmp_path / "bpda.pb", "--json", expect=0).stdout)
    assert broken["valid"] and broken["attacked_accuracy"] < 0.1

"""graphgrad against the TensorFlow route, the protobuf floor and the I/O limit.

    python bench/run.py [--repeat 3]

Builds its inputs with TensorFlow the first time (cached in bench/.cache), then
measures whole processes (wall time, peak RSS via wait4) side by side in one run,
and prints ratios, since absolute times on a shared machine are not stable. Each
figure is the median of --repeat rounds; a round runs every command of a case once.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, ".cache")
PYTHON = sys.executable
GRAPHGRAD = [PYTHON, "-m", "graphgrad"]
REPLACING = "graphgrad rewrite, replacing a file"  # fsynced before its rename (see graphgrad/files/writing.py)
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def run_once(command, limit: float | None = None):
    """Wall seconds and peak RSS (MB) of one whole process; ``command`` may be
    ``(arguments, exit code)`` for a command that succeeds with another code (diff: 1).
    A process still running after ``limit`` seconds is killed: ``(None, None)``."""
    arguments, expected = command if isinstance(command, tuple) else (command, 0)
    start = time.perf_counter()
    process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG if limit else 0)
        if pid:
            break
        if time.perf_counter() - start > limit:
            process.kill()
            process.wait()
            return None, None
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != expected:
        raise SystemExit(f"failed: {' '.join(arguments)}\n{process.stderr.read().decode()}")
    return seconds, max(usage.ru_maxrss, _orphans_peak()) / 1024


def _become_subreaper() -> None:
    """Orphaned descendants (a fork server that graphgrad's TensorFlow job ran in,
    outliving the command by a moment) come to this process, which reaps them and
    counts their memory (Linux's PR_SET_CHILD_SUBREAPER); elsewhere, nothing."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _orphans_peak(limit: float = 30.0) -> int:
    """The largest peak RSS (KB) among the measured command's orphaned descendants,
    each reaped as it ends (its own reaped children counted in it), within ``limit`` s."""
    peak, until = 0, time.monotonic() + limit
    while time.monotonic() < until:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            peak = max(peak, usage.ru_maxrss)
        else:
            time.sleep(0.01)
    return peak


def measure(commands: dict, repeat: int, before=None) -> dict:
    """Median wall seconds and peak RSS of each command, run in turns (one of each
    per round), so that a change in the machine's load hits all of them alike.
    ``before(label)`` runs before each run (to clear an output)."""
    runs = {label: [] for label in commands}
    for _ in range(repeat):
        for label, command in commands.items():
            if before:
                before(label)
            runs[label].append(run_once(command))
    return {
        label: (statistics.median(t for t, _ in results), statistics.median(r for _, r in results))
        for label, results in runs.items()
    }


def compile_bytecode():
    """Compile graphgrad's modules, as ``pip install`` does: an editable install on
    a machine with PYTHONDONTWRITEBYTECODE set would otherwise compile them from
    source in every measured process."""
    package = os.path.join(os.path.dirname(HERE), "graphgrad")
    subprocess.run([PYTHON, "-m", "compileall", "-q", package], check=True)


def ensure_inputs():
    if not os.path.exists(os.path.join(CACHE, "inputs-v3")):
        print("building inputs with TensorFlow (once) ...", flush=True)
        subprocess.run([PYTHON, os.path.join(HERE, "make_inputs.py"), CACHE], check=True, env=ENV)
        open(os.path.join(CACHE, "inputs-v3"), "w").close()  # bump when make_inputs.py changes


def row(label, seconds, rss, base_seconds):
    return f"  {label:<36} {seconds:8.3f} s {rss:8.0f} MB   x{seconds / base_seconds:6.2f}"


def table(title, results, base_label):
    """Print a case's title and a row per command, ratios against ``base_label``'s
    time; returns that time."""
    base = results[base_label][0]
    print(f"\n{title}")
    for label, (seconds, rss) in results.items():
        print(row(label, seconds, rss, base))
    return base


def built(name, target):
    """The cached input ``name``, made by ``make_inputs.py CACHE target`` in a process
    of its own the first time (a child inherits this process's peak RSS: building
    here would raise every later row's RSS column)."""
    path = os.path.join(CACHE, name)
    if not os.path.exists(path):
        subprocess.run([PYTHON, os.path.join(HERE, "make_inputs.py"), CACHE, target], check=True, env=ENV)
    return path


OP_COUNTS = "click + op counts, no checks"
RESET = "graphgrad reset of the rewrite"
DIFF = "graphgrad diff, input vs rewrite"
DIFF_FLOOR = "protobuf parse + compare, both"
IMPORTS = "click + protobuf imports, no work"

def single_file(name, op_type, spec, repeat, work, small_nodes=False, edits=None):
    """``edits``: label -> the arguments after the input of a node-level edit (insert,
    --embed), measured and compared with rewrite."""
    source = os.path.join(CACHE, name)
    size = os.path.getsize(source) / 2**20
    out = os.path.join(work, "out.pb")
    attr = "graphgrad/" + spec
    rewrite_command = GRAPHGRAD + ["rewrite", source, "--op", f"{op_type}={spec}", "-o", out]

    def prepare(label):  # every run writes a new file, or replaces one
        if os.path.exists(out):
            os.remove(out)
        if label == REPLACING:
            with open(out, "wb") as stream:
                stream.write(b"an earlier output")

    rewritten = os.path.join(work, "rewritten.pb")  # what diff compares the input with
    subprocess.run(rewrite_command[:-1] + [rewritten], check=True, stdout=subprocess.DEVNULL)
    # On many small nodes, the yardstick for what ops's checks cost (bench/op_counts.py).
    # And what any click command that reads protobuf pays before it reads a byte.
    counts = {
        OP_COUNTS: [PYTHON, os.path.join(HERE, "op_counts.py"), source],
        IMPORTS: [PYTHON, "-c", "import click, google.protobuf.descriptor_pool, google.protobuf.message_factory"],
    } if small_nodes else {}
    results = measure({
        "graphgrad rewrite": rewrite_command,
        REPLACING: rewrite_command,
        "graphgrad ops": GRAPHGRAD + ["ops", source],
        **counts,
        **{label: GRAPHGRAD + [arguments[0], source, *arguments[1:], "-o", out]
           for label, arguments in (edits or {}).items()},
        "TensorFlow route": [PYTHON, os.path.join(HERE, "tf_route.py"), source, op_type, attr, out],
        "protobuf floor (parse+set+write)": [
            PYTHON, os.path.join(HERE, "protobuf_floor.py"), source, op_type, attr, out,
        ],
        "protobuf parse only": [PYTHON, os.path.join(HERE, "protobuf_floor.py"), source],
        RESET: GRAPHGRAD + ["reset", rewritten, "-o", out],
        DIFF: (GRAPHGRAD + ["diff", source, rewritten], 1),
        DIFF_FLOOR: [PYTHON, os.path.join(HERE, "protobuf_compare.py"), source, rewritten],
        "copy (I/O limit)": ["cp", source, out],
        "copy + fsync (durable I/O limit)": ["sh", "-c", 'cp "$0" "$1" && sync "$1"', source, out],
        "python start-up": [PYTHON, "-c", "pass"],
    }, repeat, before=prepare)
    startup = results["python start-up"]
    floor = table(f"{name}: {size:.1f} MB   (ratios against the protobuf floor)", results,
                  "protobuf floor (parse+set+write)")
    rewrite, tf_route = results["graphgrad rewrite"][0], results["TensorFlow route"][0]
    ops_floor = results["protobuf parse only"][0]
    copy_floor = results["copy (I/O limit)"][0] + startup[0]
    print(f"  rewrite vs TensorFlow route: {tf_route / rewrite:.1f}x faster")
    print(f"  rewrite vs protobuf floor:   {rewrite / floor:.2f}x")
    print(f"  ops vs parse-only floor:     {results['graphgrad ops'][0] / ops_floor:.2f}x", end="")
    print(f"   (op counts alone: {results[OP_COUNTS][0] / ops_floor:.2f}x, click + protobuf imports alone: "
          f"{results[IMPORTS][0] / ops_floor:.2f}x)" if counts else "")
    durable_floor = results["copy + fsync (durable I/O limit)"][0] + startup[0]
    print(f"  rewrite vs copy + start-up:  {rewrite / copy_floor:.2f}x   (replacing a file, fsynced, vs copy + fsync"
          f" + start-up: {results[REPLACING][0] / durable_floor:.2f}x)")
    print(f"  rewrite peak RSS: {results['graphgrad rewrite'][1]:.0f} MB = "
          f"{(results['graphgrad rewrite'][1] - startup[1]) / size:.2f}x the file + start-up")
    print(f"  reset of the rewrite vs rewrite: {results[RESET][0] / rewrite:.2f}x, peak RSS {results[RESET][1]:.0f} MB")
    print(f"  diff vs protobuf parse + compare: {results[DIFF][0] / results[DIFF_FLOOR][0]:.2f}x, "
          f"peak RSS {results[DIFF][1]:.0f} MB against {results[DIFF_FLOOR][1]:.0f} MB")
    for label in edits or {}:
        print(f"  {label.removeprefix('graphgrad ')} vs rewrite: {results[label][0] / rewrite:.2f}x, "
              f"peak RSS {results[label][1]:.0f} MB")
    return results


def embed_20k(repeat, work, instructions=False):
    """--embed of 20,000 nodes among 100k small nodes, against rewrite of the same nodes."""
    source = built("chain20k.pb", "chain20k")
    out = os.path.join(work, "out.pb")

    def prepare(_):
        if os.path.exists(out):
            os.remove(out)

    rules = ["--op", "Sign=ste(clip=1.0)", "-o", out]
    results = measure({
        "graphgrad rewrite": GRAPHGRAD + ["rewrite", source, *rules],
        "graphgrad rewrite --embed": GRAPHGRAD + ["rewrite", source, *rules, "--embed"],
    }, repeat, before=prepare)
    table("chain20k.pb: 100k small nodes, 20,000 Signs   (ratios against rewrite)", results, "graphgrad rewrite")
    if instructions:
        counts = {label: instructions_of(GRAPHGRAD + ["rewrite", source, *rules, *extra], prepare)
                  for label, extra in (("rewrite", []), ("rewrite --embed", ["--embed"]))}
        print(f"  instructions (callgrind): rewrite {counts['rewrite'] / 1e9:.3f} G, --embed "
              f"{counts['rewrite --embed'] / 1e9:.3f} G: x {counts['rewrite --embed'] / counts['rewrite']:.2f}")


def rules_20k(repeat, work):
    """20,000 name-glob rules (a rules file of 0.9 MB) on 100k small nodes, against
    one --op rule selecting the same 20,000 Signs: rules are matched through an
    index of their globs' literal starts, not tried on every node."""
    source = built("chain20k.pb", "chain20k")
    rules = os.path.join(work, "rules.toml")
    with open(rules, "w") as stream:
        for index in range(20_000):
            stream.write(f'[[rule]]\nnode = "Sign_{index}*"\ngradient = "ste"\n')
    out = os.path.join(work, "out.pb")
    results = measure({
        "graphgrad rewrite --op Sign=ste": GRAPHGRAD + ["rewrite", source, "--op", "Sign=ste", "-o", out],
        "graphgrad rewrite, 20,000 glob rules": GRAPHGRAD + ["rewrite", source, "--rules", rules, "--force",
                                                             "--allow-missing", "-o", out],
    }, repeat, before=lambda _: os.path.exists(out) and os.remove(out))
    table("chain20k.pb: 100k small nodes, 20,000 glob rules   (ratios against one --op rule)", results,
          "graphgrad rewrite --op Sign=ste")


def nested(repeat, work):
    """check through nested function calls, 6 and 12 deep: each level's gradient copy
    inlines the calls below it, so the time grows with the depth, not exponentially."""
    built("nested12.pb", "nested")
    results = measure({
        f"graphgrad check, {depth} nested calls": GRAPHGRAD + ["check", os.path.join(CACHE, f"nested{depth}.pb"),
                                                            "--x", "x", "--y", "y"]
        for depth in (6, 12)
    }, repeat)
    table("nested{6,12}.pb: tf.functions each calling the next   (ratios against 6 deep)", results,
          "graphgrad check, 6 nested calls")
    source, out = built("calls10k.pb", "calls10k"), os.path.join(work, "calls10k_out.pb")
    edits = measure({
        "graphgrad rewrite --op Sign=ste": GRAPHGRAD + ["rewrite", source, "--op", "Sign=ste", "-o", out],
        "graphgrad insert at the input": GRAPHGRAD + ["insert", source, "--at", "x:0", "--grad", "scale(2)",
                                                       "-o", out],
    }, repeat, before=lambda _: os.path.exists(out) and os.remove(out))
    table("calls10k.pb: 10,000 functions, each a Sign and a call of the next   (ratios against rewrite)", edits,
          "graphgrad rewrite --op Sign=ste")
    bottom = built("calls10k_bottom.pb", "calls10k")
    deep = measure({
        "graphgrad rewrite --op Sign=ste": GRAPHGRAD + ["rewrite", bottom, "--op", "Sign=ste", "-o", out],
        "graphgrad insert at the input": GRAPHGRAD + ["insert", bottom, "--at", "x:0", "--grad", "scale(2)",
                                                       "-o", out],
    }, repeat, before=lambda _: os.path.exists(out) and os.remove(out))
    table("calls10k_bottom.pb: 10,000 functions each calling the next, one Sign in the innermost   (ratios against "
          "insert)", deep, "graphgrad insert at the input")


def show(repeat, work):
    """show of the path x -> logits through about 25,000 nodes in name scopes (an
    Inception's size), against ops of the same file and Graphviz's own layout of the
    pictures the page holds (the whole path's and each folded box's inside; issue 31:
    at most 3x ops, plus the layout)."""
    from graphgrad.files.reading import read_model
    from graphgrad.jobs.folding import fold
    from graphgrad.jobs.show import LAYOUT_LIMIT, ShowOptions, path_picture, to_dot

    source = built("inception_like.pb", "inception_like")
    page, dots = os.path.join(work, "path.html"), os.path.join(work, "pictures.dot")
    options = ShowOptions(x=("x",), y="logits")
    picture = path_picture(read_model(source).graphs()[0][1], options)
    views = fold(picture.nodes, picture.edges, picture.bodies, options.max_nodes, LAYOUT_LIMIT)
    with open(dots, "w") as stream:
        stream.writelines(to_dot(view, legend=False) for view in views)
    layout = f"Graphviz's layout of its {len(views)} pictures"
    results = measure({
        "graphgrad ops": GRAPHGRAD + ["ops", source],
        "graphgrad show --x --y, .html": GRAPHGRAD + ["show", source, "--x", "x", "--y", "logits", "-o", page],
        layout: ["dot", "-Tsvg", dots, "-o", os.path.join(work, "pictures.svg")],
    }, repeat)
    base = table("inception_like.pb: 25,502 nodes in name scopes   (ratios against ops)", results, "graphgrad ops")
    limit = 3 * base + results[layout][0]
    print(f"  show vs 3x ops + layout: {results['graphgrad show --x --y, .html'][0] / limit:.2f}x the limit; "
          f"page {os.path.getsize(page) / 2**20:.2f} MB")


def tflite(repeat, work):
    """A TensorFlow Lite MobileNetV2 (float16 weights, 7 MB) read and rebuilt, against
    TensorFlow loading the frozen graph of the same model (issue 50: within 2x), and
    ops on the .tflite against ops on that frozen graph (within 1.5x)."""
    built("mobilenet.pb", "mobilenet")
    lite = built("mobilenet.tflite", "mobilenet_tflite")
    frozen = os.path.join(CACHE, "mobilenet.pb")
    route = "TensorFlow loads the frozen graph"
    results = measure({
        "graphgrad convert .tflite -o .pb": GRAPHGRAD + ["convert", lite, "-o", os.path.join(work, "rebuilt.pb")],
        route: [PYTHON, os.path.join(HERE, "tf_load_route.py"), frozen],
        "graphgrad ops .tflite": GRAPHGRAD + ["ops", lite],
        "graphgrad ops frozen .pb": GRAPHGRAD + ["ops", frozen],
    }, repeat)
    base = table(f"mobilenet.tflite: {os.path.getsize(lite) / 2**20:.1f} MB, MobileNetV2 with float16 weights   "
                 "(ratios against TensorFlow's load of mobilenet.pb)", results, route)
    ops_ratio = results["graphgrad ops .tflite"][0] / results["graphgrad ops frozen .pb"][0]
    print(f"  rebuild vs TensorFlow's load: {results['graphgrad convert .tflite -o .pb'][0] / base:.2f}x (limit 2x); "
          f"ops .tflite vs ops .pb: {ops_ratio:.2f}x (limit 1.5x)")


def unfreeze(repeat, work):
    """unfreeze of the 95 MB frozen model against what a user would write with
    TensorFlow alone (bench/unfreeze_route.py: variables made from the constants,
    the graph imported onto them, a checkpoint saved)."""
    source = os.path.join(CACHE, "dense.pb")
    out = os.path.join(work, "trainable")
    route = "TensorFlow route"
    results = measure({
        "graphgrad unfreeze": GRAPHGRAD + ["unfreeze", source, "-o", out, "--force"],
        route: [PYTHON, os.path.join(HERE, "unfreeze_route.py"), source, out],
        "checkpoint only (no graph, floor)": [PYTHON, os.path.join(HERE, "checkpoint_floor.py"), source, out],
    }, repeat, before=lambda _: shutil.rmtree(out, ignore_errors=True))
    base_seconds = table("dense.pb: 95.4 MB, 40 layers' weights made variables   (ratios against the TensorFlow "
                         "route)", results, route)
    base_rss = results[route][1]
    seconds, rss = results["graphgrad unfreeze"]
    print(f"  unfreeze vs TensorFlow route: {seconds / base_seconds:.2f}x the time, {rss / base_rss:.2f}x the peak RSS")
    floor = results["checkpoint only (no graph, floor)"][0]
    print(f"  unfreeze vs the checkpoint-only floor: {seconds / floor:.2f}x the time")


def unfreeze_constants(work, limit: float = 900):
    """unfreeze --min-size 1 of 10,000 and 100,000 scalar constants against the
    TensorFlow route of the same weights (once each: minutes), the route stopped
    after ``limit`` seconds. What must hold: graphgrad's time grows linearly."""
    out = os.path.join(work, "trainable")
    route = "TensorFlow route"
    print(f"\nunfreeze --min-size 1 of scalar constants in a chain   (one run each; the route stopped after "
          f"{limit:.0f} s)")
    for count in (10_000, 100_000):
        source = built(f"constants{count}.pb", f"constants{count}")
        for label, command in {"graphgrad unfreeze": GRAPHGRAD + ["unfreeze", source, "--min-size", "1", "-o", out,
                                                                   "--force"],
                               route: [PYTHON, os.path.join(HERE, "unfreeze_route.py"), source, out, "1"]}.items():
            shutil.rmtree(out, ignore_errors=True)
            seconds, rss = run_once(command, limit)
            shown = f"{seconds:8.1f} s {rss:8.0f} MB" if seconds else f"  over {limit:.0f} s, stopped"
            print(f"  {count:>7} constants  {label:<20} {shown}")


BPDA_ROWS = [  # (label, model, y, bypass to, its surrogate, EOT runs)
    ("undefended", "digits_cnn.pb", "logits", None, "", 1),
    ("bit depth, no bypass", "digits_bit_depth.pb", "classifier/logits", None, "", 1),
    ("bit depth, BPDA", "digits_bit_depth.pb", "classifier/logits", "defence/squeezed:0", "identity", 1),
    ("JPEG-like, no bypass", "digits_jpeg.pb", "classifier/logits", None, "", 1),
    ("JPEG-like, BPDA", "digits_jpeg.pb", "classifier/logits", "defence/decoded:0", "identity", 1),
    ("thermometer, no bypass", "digits_thermometer.pb", "classifier/logits", None, "", 1),
    ("thermometer, BPDA", "digits_thermometer.pb", "classifier/logits", "defence/encoded:0",
     "thermometer(levels=16)", 1),
    ("random resize, no EOT", "digits_resize_pad.pb", "classifier/logits", None, "", 1),
    ("random resize, EOT 10", "digits_resize_pad.pb", "classifier/logits", None, "", 10),
]
THERMOMETER_LEVELS = "16"
EPSILONS = ("0.05", "0.1", "0.2", "0.3")
ART_SEEDS = 5


def _attack_report(command: list) -> dict:
    """graphgrad attack's --json report: exit 0 (an evaluation) or 3 (none: a masked gradient, which the
    no-bypass rows show on purpose); any other exit is a failure of the bench."""
    done = subprocess.run(command, capture_output=True, text=True, env=ENV)
    if done.returncode not in (0, 3):
        raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)
    return json.loads(done.stdout)


def bpda(repeat, work):
    """Accuracy under L-infinity PGD (40 steps) of the digits CNN and of it behind three
    defences, on the 100 held-out images of fixtures/: without bypass (the gradient is
    masked), with it (BPDA), and the randomised one with EOT and without (each judged
    over 10 runs); each attack once. The Adversarial Robustness Toolbox's PGD on the
    same graphs where no EOT is needed (bench/art_route.py), and both whole processes'
    times on one attack."""
    fixtures = os.path.join(os.path.dirname(HERE), "fixtures")
    images, labels = (os.path.join(fixtures, name) for name in ("digits_test_images.npy", "digits_test_labels.npy"))
    art = _peer_path("art", "adversarial-robustness-toolbox==1.20.1", os.path.join(CACHE, "art"))
    print("\ndigits CNN (fixtures/): accuracy under L-infinity PGD, 40 steps, 100 held-out images "
          "(graphgrad attack, each image at its most adversarial step; in parentheses at its last step, as ART "
          f"returns it, and ART 1.20.1's in brackets, each the mean over {ART_SEEDS} random starts)")
    print(f"  {'model':<24} {'clean':>6} " + " ".join(f"{'eps ' + eps:>21}" for eps in EPSILONS))
    gaps, timed = [], None
    for label, name, y, bypass_to, surrogate, eot in BPDA_ROWS:
        model = os.path.join(fixtures, name)
        if bypass_to:
            model = os.path.join(work, f"bpda_{name}")
            subprocess.run(GRAPHGRAD + ["bypass", os.path.join(fixtures, name), "--from", "x:0", "--to", bypass_to,
                                        "--surrogate", surrogate, "-o", model], check=True, stdout=subprocess.DEVNULL,
                           env=ENV)
        cells, clean = [], 0.0
        for eps in EPSILONS:
            judged = ["--eval-runs", "10"] if "random" in label else []  # the random one judged alike, EOT or not
            ours = GRAPHGRAD + ["attack", model, "--y", y, "--input", images, "--labels", labels, "--eps", eps,
                                "--steps", "40", "--eot", str(eot), "--json", *judged]
            report = _attack_report(ours)
            clean, cell = report["clean_accuracy"], f"{report['attacked_accuracy']:.0%}"
            if art is not None and (bypass_to or label == "undefended"):
                # Like for like: ART's PGD returns each image's last step, so graphgrad's --keep last; both
                # averaged over ART_SEEDS random starts (one start's luck moves 100 images' accuracy 3 points).
                last = sum(_attack_report(ours + ["--keep", "last", "--seed", str(seed)])["attacked_accuracy"]
                           for seed in range(ART_SEEDS)) / ART_SEEDS
                theirs = [PYTHON, os.path.join(HERE, "art_route.py"), model, "x:0", f"{y}:0", images, labels, eps, "40",
                          art]
                seeds = [str(ART_SEEDS)]
                if surrogate.startswith("thermometer"):  # ART's own encoding and gradient estimate in front
                    theirs[2:4] = [os.path.join(fixtures, name), bypass_to]
                    seeds.append(THERMOMETER_LEVELS)
                peer = json.loads(subprocess.run(theirs + seeds, check=True, capture_output=True,
                                                 text=True, env=ENV).stdout.splitlines()[-1])
                cell += f" ({last:.1%}) [{peer['attacked_accuracy']:.1%}]"
                gaps.append(abs(peer["attacked_accuracy"] - last))
                timed = timed or (ours + ["--keep", "last"], theirs)
            cells.append(cell)
        print(f"  {label:<24} {clean:6.0%} " + " ".join(f"{cell:>21}" for cell in cells))
    if timed:
        results = measure({"graphgrad attack": timed[0], "ART 1.20.1 PGD": timed[1]}, repeat)
        base = table("one attack (undefended, eps 0.05), whole processes   (ratios against ART's)", results,
                     "ART 1.20.1 PGD")
        print(f"  accuracy under attack, graphgrad --keep last against ART (means of {ART_SEEDS} random starts): "
              f"at most {max(gaps):.1%} apart; graphgrad "
              f"{results['graphgrad attack'][0] / base:.2f}x ART's time")


def instructions_of(command, prepare) -> int:
    """The instructions one run of ``command`` executes, counted by callgrind: the same
    from run to run whatever the machine's load (string hashing fixed, code compiled
    before, an empty output directory), where wall times on this shared machine move
    by 15%."""
    env = dict(ENV, PYTHONHASHSEED="0")
    prepare(None)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)  # compiles what changed, uncounted
    prepare(None)
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return int(re.search(r"Collected : (\d+)", done.stderr).group(1))


def batch(name, label, repeat, work):
    """-j 1 against -j 2 on a folder of graphs: whole processes, and files per second
    once started (from the time that the second half of the files adds)."""
    source = os.path.join(CACHE, name)
    files = sorted(os.path.join(source, f) for f in os.listdir(source))
    size = sum(os.path.getsize(f) for f in files) / 2**20
    halves = {"all": [source], "half": files[: len(files) // 2]}
    outputs, commands = {}, {}
    for jobs in (1, 2):
        for part, inputs in halves.items():
            outputs[jobs, part] = os.path.join(work, f"out{jobs}{part}")
            commands[jobs, part] = GRAPHGRAD + ["rewrite", *inputs, "--op", "Sign=ste",
                                                "--out-dir", outputs[jobs, part], "-j", str(jobs)]
    timings = measure(commands, repeat, before=lambda key: shutil.rmtree(outputs[key], ignore_errors=True))
    print(f"\n{name}/: {label}, {size:.0f} MB in all")
    for jobs in (1, 2):
        seconds, rss = timings[jobs, "all"]
        print(f"  graphgrad rewrite -j {jobs}             {seconds:8.3f} s {rss:8.0f} MB")
    print(f"  -j 2 throughput vs -j 1, whole processes: {timings[1, 'all'][0] / timings[2, 'all'][0]:.2f}x")
    rate = {jobs: timings[jobs, "all"][0] - timings[jobs, "half"][0] for jobs in (1, 2)}
    print(f"  -j 2 throughput vs -j 1, once started:    {rate[1] / rate[2]:.2f}x"
          f"  ({len(files) - len(files) // 2} more files: {rate[1]:.3f} s against {rate[2]:.3f} s)")
    # A -j 1 run is a fixed part (start-up, imports, planning) plus per-file work;
    # -j 2 can at best halve the work, never the fixed part.
    whole = timings[1, "all"][0]
    fixed = whole - 2 * rate[1]
    print(f"  -j 2 ceiling, whole processes:           {whole / (fixed + rate[1]):.2f}x  (fixed part of -j 1: "
          f"{fixed:.3f} s; work halved, worker pool for free)")


ATTRIBUTION_METHODS = ["gradient", "grad_x_input", "integrated_gradients(steps=50)", "guided_backprop", "deconvnet",
                       "eps_lrp(eps=0.0001)", "deeplift"]
SHAP_TARGET = os.path.join(CACHE, "shaplib")  # shap installed here if the environment lacks it
SALIENCY_TARGET = os.path.join(CACHE, "saliencylib")  # PAIR's saliency, likewise


def _peer_path(module: str, requirement: str, target: str):
    """Where a peer's ``module`` can be imported from ("" if installed), or None,
    with the reason printed: installed once into ``target`` if missing."""
    if subprocess.run([PYTHON, "-c", f"import {module}"], capture_output=True).returncode == 0:
        return ""
    if not os.path.isdir(target):
        print(f"installing {requirement} for the comparison (once) ...", flush=True)
        installed = subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "--target", target, requirement],
                                   capture_output=True, text=True)
        if installed.returncode:
            shutil.rmtree(target, ignore_errors=True)
            print(f"  {requirement} not measured: pip install failed ({installed.stderr.strip()[-200:]})")
            return None
    return target


# Each model of the attribution case: its input, the rows' shape, the target, the methods run and its
# title. MobileNetV2's random weights put every row in class 995; the others' classes are all near 0.1.
ATTRIBUTION_MODELS = {
    "attribution": ((64, 784), 0, ATTRIBUTION_METHODS,
                    "attribution.pb: 784 -> 6 x 512 -> 10 (Relu, Tanh, Sigmoid), 64 rows"),
    "cnn": ((64, 28, 28, 1), 0, ATTRIBUTION_METHODS + ["blur_ig", "guided_ig", "xrai"],
            "cnn.pb: 28 x 28 x 1 -> 2 x (convolution, Relu, max pooling) -> 10, 64 rows"),
    "mobilenet": ((8, 224, 224, 3), 995, ["gradient", "integrated_gradients(steps=50)", "guided_backprop", "deeplift",
                                         "blur_ig", "guided_ig", "xrai"],
                  "mobilenet.pb: Keras' MobileNetV2 (random weights; Relu6, batch normalisation), 8 rows, class 995"),
}


IG_TOLERANCE, IG_MAX_STEPS, IG_ROWS = 0.01, 1024, 1


def ig_steps(work):
    """Integrated gradients on MobileNetV2 (random weights, batch normalisation
    calibrated as make_inputs.py does), a row of noise, class 995, from a zero
    baseline: the completeness gap at 50 steps, then the gradient evaluations each
    tool needs for every row's gap to fall under 1%: graphgrad's --tolerance (adaptive
    quadrature: the segments holding most of the error doubled, no point computed twice) against PAIR's
    saliency and alibi (in TensorFlow 2.14's virtualenv, on the model rebuilt from
    the same weights), each at the fewest power-of-two steps that get there
    (bench/ig_gap_route.py, bench/alibi_gap_route.py; searched from a quarter of
    graphgrad's largest count). Counts, not times: each run once."""
    import numpy as np

    source = built("mobilenet.pb", "mobilenet")
    rows = os.path.join(work, "ig_rows.npy")
    np.save(rows, np.random.default_rng(0).uniform(0, 1, size=(IG_ROWS, 224, 224, 3)).astype(np.float32))
    common = ["attribute", source, "--input", rows, "--x", "x", "--y", "logits", "--target", "995", "--json"]

    def ours(*extra):
        done = subprocess.run(GRAPHGRAD + common + ["-o", os.path.join(work, "ig.npy"), *extra], check=True,
                              capture_output=True, text=True, env=ENV)
        return json.loads(done.stdout)

    def largest_gap(report):
        return max(abs(row["attribution_sum"] - row["output_difference"]) / abs(row["output_difference"])
                   for row in report["completeness"])

    fifty = ours("--method", "integrated_gradients(steps=50)")
    refined = ours("--method", "integrated_gradients", "--tolerance", str(IG_TOLERANCE), "--max-steps",
                   str(IG_MAX_STEPS))
    print(f"\nmobilenet.pb: integrated gradients, {IG_ROWS} row(s), class 995: gradient evaluations (all rows) for "
          f"every row's completeness gap under {IG_TOLERANCE:.0%}")
    print(f"  at 50 steps, graphgrad reports gaps up to {largest_gap(fifty):.1%}")
    gap = largest_gap(refined)
    evaluations = refined["refinement"]["evaluations"]
    print(f"  graphgrad --tolerance {IG_TOLERANCE:g}          {evaluations:8d} evaluations, largest gap {gap:.2%}"
          + ("" if refined["refinement"]["met"] else f" (stopped at --max-steps {IG_MAX_STEPS})"))
    saliency_path = _peer_path("saliency.core", "saliency==0.2.1", SALIENCY_TARGET)
    if saliency_path is not None:
        start = max(16, max(row["steps"] for row in refined["completeness"]) // 4)  # steps: a row's evaluations
        done = subprocess.run([PYTHON, os.path.join(HERE, "ig_gap_route.py"), source, "x:0", "logits:0", "995", rows,
                               str(IG_TOLERANCE), str(start), str(IG_MAX_STEPS), saliency_path], check=True,
                              capture_output=True, text=True, env=ENV)
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"  saliency 0.2.1, x_steps {theirs['steps']:<5}      {theirs['evaluations']:8d} evaluations, largest "
              f"gap {theirs['gap']:.2%}" + ("" if theirs["met"] else f" (stopped at {IG_MAX_STEPS} steps)")
              + f"   x {theirs['evaluations'] / evaluations:.2f} graphgrad's")
    python = _tf214_python()
    if python is not None:
        weights = os.path.join(work, "mobilenet_weights.npz")
        subprocess.run([PYTHON, "-c", "import sys, keras, numpy; numpy.savez(sys.argv[2], "
                        "*keras.models.load_model(sys.argv[1]).get_weights())", source[:-3] + ".keras", weights],
                       check=True, capture_output=True, env=ENV)
        start = max(16, max(row["steps"] for row in refined["completeness"]) // 4)
        done = subprocess.run([python, os.path.join(HERE, "alibi_gap_route.py"), weights, rows, "995",
                               str(IG_TOLERANCE), str(start), str(IG_MAX_STEPS)], check=True, capture_output=True,
                              text=True, env=ENV)
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
        ours_differences = [row["output_difference"] for row in refined["completeness"]]
        carried = max(abs(a - b) / abs(b) for a, b in zip(theirs["differences"], ours_differences))
        print(f"  alibi 0.9.6, n_steps {theirs['steps']:<5}         {theirs['evaluations']:8d} evaluations, largest "
              f"gap {theirs['gap']:.2%}" + ("" if theirs["met"] else f" (stopped at {IG_MAX_STEPS} steps)")
              + f"   x {theirs['evaluations'] / evaluations:.2f} graphgrad's (Gauss-Legendre; the model rebuilt in "
              f"TensorFlow 2.14's Keras, f(x) - f(0) within {carried:.0e} of the graph's)")


def attribution(repeat, work):
    """Each method of graphgrad attribute against a plain gradient, deeplift against
    SHAP's DeepExplainer (the same rule) and integrated gradients and Blur IG (on
    images) against PAIR's saliency, on the same graphs: an MLP, a CNN and MobileNetV2."""
    shap_path = _peer_path("shap", "shap", SHAP_TARGET)
    saliency_path = _peer_path("saliency.core", "saliency==0.2.1", SALIENCY_TARGET)
    for name, (shape, target, methods, title) in ATTRIBUTION_MODELS.items():
        _attribution_model(name, shape, str(target), methods, title, shap_path, saliency_path, repeat, work)


def _attribution_model(name, shape, target, methods, title, shap_path, saliency_path, repeat, work):
    import numpy as np

    source = built(f"{name}.pb", name)
    rows = os.path.join(work, f"{name}_rows.npy")
    np.save(rows, np.random.default_rng(0).uniform(0, 1, size=shape).astype(np.float32))
    outputs = {method: os.path.join(work, f"{name}_{index}.npy") for index, method in enumerate(methods)}
    commands = {
        method: GRAPHGRAD + ["attribute", source, "--method", method, "--input", rows, "--x", "x", "--y", "logits",
                             "--target", target, "-o", out]
        for method, out in outputs.items()
    }
    peers = {}
    if shap_path is not None:
        peers["SHAP DeepExplainer"] = ("shap_route.py", shap_path, "deeplift")
    if saliency_path is not None:
        peers["saliency IntegratedGradients(50)"] = ("saliency_route.py", saliency_path,
                                                     "integrated_gradients(steps=50)")
        if "blur_ig" in methods:
            peers["saliency BlurIG (its defaults)"] = ("saliency_blur_route.py", saliency_path, "blur_ig")
        if "guided_ig" in methods:
            peers["saliency GuidedIG (its defaults)"] = ("saliency_guided_route.py", saliency_path, "guided_ig")
        if "xrai" in methods:
            peers["saliency XRAI (its defaults)"] = ("saliency_xrai_route.py", saliency_path, "xrai")
    for label, (route, peer_path, _) in peers.items():
        outputs[label] = os.path.join(work, f"{name}_{route}.npy")
        commands[label] = [PYTHON, os.path.join(HERE, route), source, "x:0", "logits:0", target, rows,
                           outputs[label], *([peer_path] if peer_path else [])]
    results = measure(commands, repeat)
    table(f"{title}   (ratios against a plain gradient)", results, "gradient")
    for label, (_, _, method) in peers.items():
        ours, theirs = np.load(outputs[method]), np.load(outputs[label])
        print(f"  {method} vs {label}: {results[label][0] / results[method][0]:.2f}x faster; largest "
              f"difference {np.abs(ours - theirs).max():.2e} (values up to {np.abs(theirs).max():.2e})")
    found = subprocess.run([PYTHON, os.path.join(HERE, "deletion_auc.py"), source, "x:0", "logits:0", target, rows,
                            *outputs.values()], check=True, env=ENV, capture_output=True, text=True)
    figures = json.loads(found.stdout.strip().splitlines()[-1])
    print("  deletion AUC (the target's probability as the most attributed entries are zeroed; lower: more "
          "faithful), and the completeness gap (|sum - (y(x) - y(0))| / |y(x) - y(0)|, the largest of the rows; "
          "promised by DeepLIFT, SHAP and integrated gradients):")
    for label, path in outputs.items():
        area, gap = figures[path]
        print(f"    {label:<36} {area:.4f}   {gap:.1e}")


KERAS_VIS_TARGET = os.path.join(CACHE, "tfkerasvislib")  # tf-keras-vis, installed as SHAP is
# innvestigate and alibi need TensorFlow < 2.15 and numpy < 2: a virtualenv of their own
# (spaCy, which alibi imports, needs click without requiring it)
TF214_VENV = os.path.join(CACHE, "tf214-venv")
TF214_PEERS = ["tensorflow-cpu==2.14.1", "innvestigate==2.1.2", "alibi==0.9.6", "click", "numpy<2"]
TF214_ROUTES = {"innvestigate 2.1.2": "innvestigate_route.py", "alibi 0.9.6": "alibi_route.py"}
CAMS = ("gradcam", "layercam")  # the class activation maps the warm case compares with tf-keras-vis'
WARM_TOOLS = {
    "session": "session.run of tf.gradients",
    "graphgrad": "graphgrad Explainer, gradient",
    "tf-keras-vis": "tf-keras-vis Saliency",
    "graphgrad-gradcam": "graphgrad Explainer, gradcam",
    "tf-keras-vis-gradcam": "tf-keras-vis Gradcam",
    "graphgrad-layercam": "graphgrad Explainer, layercam",
    "tf-keras-vis-layercam": "tf-keras-vis Layercam",
}


# Each model of the warm case: its inputs' target, the rows' shape, the Keras layer of its
# Grad-CAM (the one graphgrad takes by default), and its title.
WARM_MODELS = {
    "cnn": ((64, 28, 28, 1), "pool2", "cnn.pb: 28 x 28 x 1 -> 2 x (convolution, Relu, max pooling) -> 10, 64 rows"),
    "mobilenet": ((8, 224, 224, 3), "out_relu", "mobilenet.pb: Keras' MobileNetV2 (random weights), 8 rows"),
}


def _tf214_python():
    """The Python of a virtualenv with the peers that need TensorFlow 2.14, made
    once; None, with the reason printed, where they cannot be installed."""
    python = os.path.join(TF214_VENV, "bin", "python")
    if not os.path.exists(python):
        print(f"installing {', '.join(TF214_PEERS)} in a virtualenv of their own (once) ...", flush=True)
        made = subprocess.run([PYTHON, "-m", "venv", TF214_VENV], capture_output=True, text=True)
        installed = made.returncode == 0 and subprocess.run(
            [python, "-m", "pip", "install", "--quiet", *TF214_PEERS], capture_output=True, text=True)
        if not installed or installed.returncode:
            shutil.rmtree(TF214_VENV, ignore_errors=True)
            why = (installed.stderr if installed else made.stderr).strip()[-200:]
            print(f"  innvestigate and alibi not measured: they could not be installed ({why})")
            return None
    return python


def tf214_peers(repeat, work):
    """innvestigate's analyzers and alibi's integrated gradients against graphgrad's
    methods of the same definitions, on the digits CNN (the peers on the Keras 2
    rebuild of its weights, in TensorFlow 2.14; graphgrad on its frozen graph):
    agreement, and warm calls (graphgrad's Explainer kept)."""
    import numpy as np

    python = _tf214_python()
    if python is None:
        return
    source = built("cnn.pb", "cnn")
    rows = os.path.join(work, "cnn_rows.npy")
    np.save(rows, np.random.default_rng(0).uniform(0, 1, size=(64, 28, 28, 1)).astype(np.float32))
    print("\ncnn.pb: innvestigate and alibi (TensorFlow 2.14, a virtualenv of their own) against graphgrad, 64 rows: "
          "warm calls, and the largest difference")
    print(f"  {'graphgrad method':<36} {'graphgrad':>10} {'the peer':>13}   difference")
    for peer, route in TF214_ROUTES.items():
        done = subprocess.run([python, os.path.join(HERE, route), os.path.join(CACHE, "cnn.npz"), rows, work],
                              capture_output=True, text=True, env=ENV)
        if done.returncode:
            raise SystemExit(f"failed: {route}\n{done.stderr[-2000:]}")
        _against_tf214_peer(peer, json.loads(done.stdout.strip().splitlines()[-1]), source, rows, repeat, work)


def _against_tf214_peer(peer, theirs, source, rows, repeat, work):
    import numpy as np

    prefix = peer.split()[0]
    for method, their_seconds in theirs.items():
        calls = []
        for _ in range(repeat):
            ran = subprocess.run([PYTHON, os.path.join(HERE, "warm_route.py"), f"graphgrad={method}",
                                  os.path.join(CACHE, "cnn.keras"), source, "pool2", rows,
                                  os.path.join(work, "ours.npy")], capture_output=True, text=True, env=ENV)
            if ran.returncode:
                raise SystemExit(f"failed: warm_route.py graphgrad={method}\n{ran.stderr[-2000:]}")
            calls.append(json.loads(ran.stdout.strip().splitlines()[-1])["warm"])
        ours, other = np.load(os.path.join(work, "ours.npy")), np.load(os.path.join(work, f"{prefix}_{method}.npy"))
        print(f"  {method:<36} {statistics.median(calls) * 1000:7.2f} ms {their_seconds * 1000:10.2f} ms   "
              f"{np.abs(ours - other).max():.2e} (values up to {np.abs(other).max():.2e}; {peer})")


def warm(repeat, work):
    """Warm calls on two CNNs: graphgrad's resident Explainer against a bare
    session.run of the same gradient and against tf-keras-vis (the Keras model the
    frozen graph was made from), each tool in processes of its own, in turns."""
    peer = _peer_path("tf_keras_vis", "tf-keras-vis==0.8.7", KERAS_VIS_TARGET)
    tools = [tool for tool in WARM_TOOLS if peer is not None or not tool.startswith("tf-keras-vis")]
    for name, (shape, layer, title) in WARM_MODELS.items():
        _warm_model(name, shape, layer, title, tools, peer, repeat, work)


def _warm_model(name, shape, layer, title, tools, peer, repeat, work):
    import numpy as np

    source, keras_model = built(f"{name}.pb", name), os.path.join(CACHE, f"{name}.keras")
    rows = os.path.join(work, f"{name}_rows.npy")
    np.save(rows, np.random.default_rng(0).uniform(0, 1, size=shape).astype(np.float32))
    runs: dict = {tool: [] for tool in tools}
    for _ in range(repeat):
        for tool in tools:
            done = subprocess.run([PYTHON, os.path.join(HERE, "warm_route.py"), tool, keras_model, source, layer, rows,
                                   os.path.join(work, f"{name}_{tool}.npy"), *([peer] if peer else [])],
                                  capture_output=True, text=True, env=ENV)
            if done.returncode:
                raise SystemExit(f"failed: warm_route.py {tool} {name}\n{done.stderr[-2000:]}")
            runs[tool].append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = {tool: statistics.median(run["first"] for run in runs[tool]) for tool in tools}
    calls = {tool: statistics.median(run["warm"] for run in runs[tool]) for tool in tools}
    print(f"\n{title}: warm calls (median of 50 in a process; ratios against the bare session.run's)")
    print(f"  {'':<36} {'first call':>10} {'warm call':>11}")
    for tool in tools:
        print(f"  {WARM_TOOLS[tool]:<36} {first[tool]:8.3f} s {calls[tool] * 1000:8.2f} ms   "
              f"x{calls[tool] / calls['session']:6.2f}")
    if peer is None:
        return
    load = {tool: np.load(os.path.join(work, f"{name}_{tool}.npy")) for tool in tools}
    gradient, saliency = load["graphgrad"], load["tf-keras-vis"]
    flat = np.abs(gradient).max(axis=-1).reshape(len(gradient), -1)
    scaled = ((flat - flat.min(1, keepdims=True)) / (flat.max(1, keepdims=True) - flat.min(1, keepdims=True)
                                                     + 1e-7)).reshape(saliency.shape)
    faster = [f"gradient {calls['tf-keras-vis'] / calls['graphgrad']:.1f}x faster"] + [
        f"{cam} {calls[f'tf-keras-vis-{cam}'] / calls[f'graphgrad-{cam}']:.1f}x faster" for cam in CAMS]
    print(f"  Explainer vs tf-keras-vis, warm: {', '.join(faster)}")
    print(f"  agreement: gradient (as Saliency scales it) {np.abs(scaled - saliency).max():.2e}; " + "; ".join(
        f"{cam} {np.abs(load[f'graphgrad-{cam}'] - load[f'tf-keras-vis-{cam}']).max():.2e} (values up to "
        f"{np.abs(load[f'tf-keras-vis-{cam}']).max():.2e})" for cam in CAMS)
        + " (tf-keras-vis' maps before their own resizing)")


def main():
    _become_subreaper()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["chain", "embed", "rules", "nested", "dense", "show", "unfreeze",
                                           "constants", "bpda", "batch", "attribution", "ig_steps", "warm", "tf214",
                                           "tflite"],
                        action="append",
                        help="run only these cases (repeatable); default: all")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the embed case's instructions with valgrind's callgrind (about two minutes)")
    args = parser.parse_args()
    cases = args.only or ["chain", "embed", "rules", "nested", "dense", "show", "unfreeze", "constants", "bpda",
                          "batch", "attribution", "ig_steps", "warm", "tf214", "tflite"]
    ensure_inputs()
    compile_bytecode()
    help_time = measure({"help": GRAPHGRAD + ["--help"]}, args.repeat)["help"][0]
    print(f"graphgrad --help: {help_time:.3f} s")
    with tempfile.TemporaryDirectory() as work:
        if "chain" in cases:
            single_file("chain.pb", "Sign", "ste(clip=1.0)", args.repeat, work, small_nodes=True, edits={
                "graphgrad rewrite --embed, 25k Signs": ["rewrite", "--op", "Sign=ste(clip=1.0)", "--embed"],
                "graphgrad insert": ["insert", "--at", "Sign_12000:0", "--grad", "scale(0.5)"],
            })
        if "embed" in cases:
            embed_20k(args.repeat, work, args.instructions)
        if "rules" in cases:
            rules_20k(args.repeat, work)
        if "nested" in cases:
            nested(args.repeat, work)
        if "dense" in cases:
            single_file("dense.pb", "Relu", "guided_relu", args.repeat, work, edits={
                "graphgrad rewrite --embed": ["rewrite", "--op", "Relu=identity", "--embed"],
                "graphgrad insert": ["insert", "--at", "dense20/BiasAdd:0", "--grad", "scale(0.5)"],
                "graphgrad insert --embed": ["insert", "--at", "dense20/BiasAdd:0", "--grad", "reverse", "--embed"],
            })
        if "show" in cases:
            show(args.repeat, work)
        if "unfreeze" in cases:
            unfreeze(args.repeat, work)
        if "tflite" in cases:
            tflite(args.repeat, work)
        if "constants" in cases:
            unfreeze_constants(work)
        if "bpda" in cases:
            bpda(args.repeat, work)
        if "batch" in cases:
            batch("small", "200 small frozen graphs (0.9 MB each, mostly copied)", args.repeat, work)
            batch("many_nodes", "200 graphs of 8000 small nodes (CPU-bound)", args.repeat, work)
        if "attribution" in cases:
            attribution(args.repeat, work)
        if "ig_steps" in cases:
            ig_steps(work)
        if "warm" in cases:
            warm(args.repeat, work)
        if "tf214" in cases:
            tf214_peers(args.repeat, work)


if __name__ == "__main__":
    main()

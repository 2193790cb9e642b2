"""Runs ONNX files exported by Tandem through code nobody here wrote: onnx.checker (full check,
with ONNX's shape inference) and OpenCV's DNN module, and compares OpenCV's outputs with the
outputs Tandem computed.

usage: onnx_runtime_check.py MANIFEST.json
The manifest is a list of cases: {"label", "onnx", "inputs": [{"name", "file", "shape"}],
"outputs": [{"file", "shape"}], "opencv": bool}; files hold float32 values, row-major.
Prints one JSON object: {label: {"checker": "ok" | error, "opencv": max abs difference over the
outputs | error text | null when not asked, "initializers": the initializers' names}}.

OpenCV's Python binding reads a 3-D NumPy array as an image with channels; a 3-D input is
therefore given as 4-D with a trailing axis of 1 (the same values in the same order).
"""
import json
import sys

import numpy as np
import onnx


def load(entry):
    return np.fromfile(entry["file"], dtype=np.float32).reshape(entry["shape"])


def check(case):
    try:
        model = onnx.load(case["onnx"])
        onnx.checker.check_model(model, full_check=True)
        return "ok"
    except Exception as e:  # the message is the result
        return f"{type(e).__name__}: {e}"


def run_opencv(case):
    import cv2

    net = cv2.dnn.readNetFromONNX(case["onnx"])
    for entry in case["inputs"]:
        x = load(entry)
        if x.ndim == 3:
            x = x[..., None]
        net.setInput(x, entry["name"])
    names = [o.name for o in onnx.load(case["onnx"]).graph.output]
    got = net.forward(names)
    worst = 0.0
    for value, entry in zip(got, case["outputs"]):
        expected = load(entry)
        value = np.asarray(value).reshape(expected.shape)
        worst = max(worst, float(np.abs(value - expected).max()))
    return worst


def main():
    cases = json.load(open(sys.argv[1]))
    results = {}
    for case in cases:
        result = {"checker": check(case), "opencv": None,
                  "initializers": [t.name for t in onnx.load(case["onnx"]).graph.initializer]}
        if case.get("opencv"):
            try:
                result["opencv"] = run_opencv(case)
            except Exception as e:
                result["opencv"] = f"{type(e).__name__}: {str(e)[-600:]}"
        results[case["label"]] = result
    print(json.dumps(results))


if __name__ == "__main__":
    main()

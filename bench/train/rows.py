"""One line per training result, for the bench/train scripts' summaries.

  rows.py ringmaster TAG RESULTS.jsonl...   Ringmaster's results
  rows.py torch TAG RESULT.json...          torch_ddp.py's results

Each line: the tag, the precision, the case (Ringmaster) or the loss scale
(PyTorch), the median step, the fraction of gradient entries exactly zero
after the last step, and Ringmaster's path.
"""
import json
import sys


def main():
    kind, tag, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    for path in paths:
        if kind == "torch":
            for r in json.load(open(path))["results"]:
                print("%-18s %-8s loss scale %-8g %.3f ms, gradient entries zero %.4f" % (
                    tag, r.get("dtype", "bf16"), r.get("loss_scale", 1), r["step_s"] * 1e3,
                    r.get("grad_zero_fraction", -1)))
            continue
        for line in open(path):
            r = json.loads(line)
            print("%-18s %-8s %-24s %.3f ms, gradient entries zero %.4f  %s" % (
                tag, r["case"]["dtype"], r["case"]["spec_name"], r["stats"]["median_s"] * 1e3,
                r.get("train", {}).get("grad_zero_fraction", 0.0), r.get("path", "")))


if __name__ == "__main__":
    main()

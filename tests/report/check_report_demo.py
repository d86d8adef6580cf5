"""check_report_demo.py DEMO OUTDIR GOLDEN_DIR: runs iscope-report-demo into a fresh OUTDIR and checks what it
wrote, not only its exit status: report.md and report.json are the goldens of the same sample analysis,
report.html is a whole page naming every finding, and trace.json is a Chrome/Perfetto trace holding exactly
the synthetic dump's events (5 steps of tokenize, forward and inference_step; 40 kernels per step; counters)."""

import collections
import json
import os
import shutil
import subprocess
import sys


def main(demo, outdir, golden):
    shutil.rmtree(outdir, ignore_errors=True)  # files of an earlier run must not pass for this one's
    run = subprocess.run([demo, outdir], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"iscope-report-demo exited {run.returncode}: {run.stderr}"

    def read(name):
        with open(os.path.join(outdir, name), encoding="utf-8") as f:
            return f.read()

    def golden_text(name):
        with open(os.path.join(golden, name), encoding="utf-8") as f:
            return f.read()

    assert read("report.md") == golden_text("sample.md"), "report.md differs from golden/sample.md"
    assert read("report.json") == golden_text("sample.json"), "report.json differs from golden/sample.json"
    report = json.loads(read("report.json"))
    assert report["findings"], "the sample analysis has findings; the JSON report lists none"

    html = read("report.html")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"), "report.html is not a whole page"
    for finding in report["findings"]:
        title = finding["title"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert title in html, f"report.html does not name the finding {finding['title']!r}"

    trace = json.loads(read("trace.json"))
    events = trace["traceEvents"]
    spans = collections.Counter(e["name"] for e in events if e.get("ph") == "X")
    expected = {"tokenize": 5, "forward": 5, "inference_step": 5, "cudaLaunchKernel": 200, "ampere_fp16_gemm": 100,
                "vectorized_elementwise_kernel<4>": 100, "cudaMemcpyAsync": 5, "cudaStreamSynchronize": 5}
    for name, count in expected.items():
        assert spans[name] == count, f"trace.json has {spans[name]} '{name}' spans, the dump {count}"
    counters = collections.Counter(e["name"] for e in events if e.get("ph") == "C")
    # cpu.user_ns is cumulative, written as a rate: the same 1 ms each step is one value, back to 0 at the last
    # sample. The GPU utilization is a level that changes at each of its 5 samples.
    assert counters["cpu.user_ns [ms/s]"] == 2 and counters["gpu.util_pct"] == 5, f"trace.json counters: {counters}"
    print(f"ok: {outdir}: report.md and report.json match the goldens, report.html names "
          f"{len(report['findings'])} findings, trace.json holds {len(events)} events")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])

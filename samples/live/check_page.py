"""Polls the live page of a running `iscope-run --live` (its token off) until the GPU side of MIN steps is measured,
then prints /data's step figures, its gpu block and timeline lanes and the GPU series of /metrics, and saves both
answers under OUTDIR (live_data.json, live_metrics.txt). Usage: check_page.py URL MIN OUTDIR (samples/live/torch_steps.py
says how the program is started)."""
import json, os, sys, time, urllib.request
url, want, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
t0, data, last = time.time(), None, None
while time.time() - t0 < 60:
    try:
        data = json.loads(urllib.request.urlopen(url + "/data", timeout=2).read())
        g = data.get("gpu")
        if g and g.get("steps_settled", 0) >= want:
            break
    except Exception as e:
        last = e
    time.sleep(0.5)
print("waited %.1f s; last error %s" % (time.time() - t0, last))
if data is None:
    sys.exit("no /data answered")
metrics = urllib.request.urlopen(url + "/metrics", timeout=2).read().decode()
open(os.path.join(out, "live_data.json"), "w").write(json.dumps(data))
open(os.path.join(out, "live_metrics.txt"), "w").write(metrics)
print("steps_total", data["steps_total"], "p50", data["p50_ms"], "p90", data["p90_ms"], "dropped", data["dropped_records"])
print("slowest", json.dumps(data["slowest"])[:300])
print("gpu", json.dumps(data["gpu"]))
tl = data["timeline"]
print("timeline keys", list(tl.keys()), "gpu lanes", len({(a["device"], a["stream"]) for a in tl.get("gpu", [])}), "gpu activities", len(tl.get("gpu", [])))
for l in metrics.splitlines():
    if l.startswith("inferscope_") and ("gpu" in l or "step_time" in l or "_count" in l or "dropped" in l or "state" in l):
        print(l)

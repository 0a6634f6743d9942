"""Host time of the datamanager's next_train on the CPU (demo scene from `odin-ns demo-scene /tmp/demo`), median of
steps 200-399 of 400, and the units it keeps. Usage: `python next_train.py B`; run with PYTHONPATH at the tree to measure."""
import time, tempfile, statistics, sys
from pathlib import Path
from odin_ns.benchmarks.host_waits import in_process_trainer
t = in_process_trainer(Path("/tmp/demo"), Path(tempfile.mkdtemp()), "cpu", int(sys.argv[1]))
dm = t.pipeline.datamanager
times = []
for step in range(400):
    s = time.perf_counter(); dm.next_train(step); times.append(time.perf_counter() - s)
print("B", sys.argv[1], "units kept", len(dm._cameras_of_units), "next_train ms, steps 200-399: median %.3f" % (statistics.median(times[200:])*1e3))

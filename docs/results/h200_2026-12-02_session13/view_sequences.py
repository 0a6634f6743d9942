"""The view sequences of 1,000 steps on cup77: odin's plan (rlg, train_cameras_sampling_seed 42) and stock's FullImageDatamanager shuffles (random.Random(42), a fresh shuffle per epoch). Not part of odin-ns; from the repository root: ``python <this file>``."""
import random, collections, numpy as np, torch
from pathlib import Path
from odin_ns.benchmarks.host_waits import in_process_trainer
t = in_process_trainer(Path("data/cup77"), Path("/tmp/seqchk"), "cpu", warmup_length=10000)
dm = t.pipeline.datamanager
plan = dm.plan
odin = [plan.views_for(s, 0)[0] for s in range(1000)]
rg = random.Random(42); stock = []
while len(stock) < 1000:
    idx = list(range(67)); rg.shuffle(idx); stock += idx
stock = stock[:1000]
print("num views in plan", plan.num_views, "units/epoch", plan.units_per_epoch, "train", len(dm.train_dataset))
for name, seq in (("odin", odin), ("stock", stock)):
    c = collections.Counter(seq)
    print(name, "distinct", len(c), "min/max count", min(c.values()), max(c.values()), "epoch0 distinct", len(set(seq[:67])))
    # camera positions: distance between consecutive views
    pos = dm.train_dataset.cameras.camera_to_worlds[:, :3, 3]
    d = [(pos[a]-pos[b]).norm().item() for a, b in zip(seq[:-1], seq[1:])]
    print("   consecutive camera distance mean %.3f" % np.mean(d), "last 10 views", seq[-10:])

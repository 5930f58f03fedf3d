"""DistDGL 2.1 peer of ``bench.distdgl``: partition, then an M-machine job on this host.

Self-contained (numpy, torch, dgl), run by ``$GNNTRAIN_DGL_PYTHON``::

    python _distdgl_peer.py launch GRAPH.npz OUTDIR '{"epochs": 4, ...}'

The npz holds ``indptr``/``indices`` (CSR of in-neighbours), ``x``, ``y``, ``train_idx``,
``test_idx`` and ``init__<param>`` arrays (the initial parameters under this model's names,
so DistDGL starts from the same point as gnntrain). ``launch``:

1. ``dgl.distributed.partition_graph`` into ``OUTDIR/parts`` (METIS, M parts, balancing
   training nodes and edges, 1 halo hop);
2. for each machine one ``DistGraphServer`` and one trainer (torch.distributed gloo,
   ``DistributedDataParallel``), started with the variables DGL's launch tool sets. All
   machines are on this host: DGL maps a client to the first ``ip_config`` line whose address
   is local, so every machine but the first runs in its own network namespace (``unshare
   --net``), joined to the others by a veth pair on a bridge in the host's namespace
   (machine m at 10.213.9.(m+1)/24, machine 0 the bridge itself; all removed afterwards);
   each machine has its own mount namespace with a private ``/dev/shm`` (DGL names its shared
   memory after the graph). Needs root, ``unshare`` and ``ip``: without them it prints
   ``ABSENT <reason>`` and exits 3.

Each trainer trains 3-layer GraphSAGE (mean) on its ``node_split`` of the training nodes, and
every ``eval_every`` epochs (and after the last) evaluates its split of the test nodes with
the training fanouts (batch 4096, not timed); it writes ``OUTDIR/trainer<rank>.json``: per-epoch wall time, loss and test
correct/total. The settings JSON: ``epochs``, ``fanouts`` (seed hop first), ``batch_size``,
``hidden``, ``layers``, ``dropout``, ``lr``, ``seed``, ``eval_every``, ``timeout_s``,
``machines`` (M, default 2).
"""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

GRAPH = "g"
SUBNET = "10.213.9."
BRIDGE = "gtdglbr"  # machine 0's interface; machine m's veth is gtdgl<m> here, NS_IF inside
NS_IF = "gteth"


def load_graph(path):  # type: ignore[no-untyped-def]
    import dgl
    import torch

    d = np.load(path)
    indptr, indices = d["indptr"], d["indices"]
    n = indptr.size - 1
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    g = dgl.graph((torch.from_numpy(indices), torch.from_numpy(dst)), num_nodes=n)
    g.ndata["feat"] = torch.from_numpy(d["x"])
    g.ndata["label"] = torch.from_numpy(d["y"])
    for name in ("train", "test"):
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.from_numpy(d[f"{name}_idx"])] = True
        g.ndata[f"{name}_mask"] = m
    init = {k[len("init__"):]: torch.from_numpy(d[k]) for k in d.files if k.startswith("init__")}
    return g, init


def partition(npz, parts_dir, machines):  # type: ignore[no-untyped-def]
    import dgl
    import torch

    g, init = load_graph(npz)
    shutil.rmtree(parts_dir, ignore_errors=True)
    t0 = time.perf_counter()
    dgl.distributed.partition_graph(g, GRAPH, machines, parts_dir, part_method="metis",
                                    balance_ntypes=g.ndata["train_mask"], balance_edges=True,
                                    num_hops=1)
    torch.save(init, os.path.join(parts_dir, "init.pt"))
    return time.perf_counter() - t0


def make_model(in_dim, n_cls, s):  # type: ignore[no-untyped-def]
    import torch.nn.functional as F
    from dgl.nn import SAGEConv
    from torch import nn

    layers = int(s["layers"])

    class SAGE(nn.Module):
        def __init__(self):  # type: ignore[no-untyped-def]
            super().__init__()
            dims = [in_dim] + [int(s["hidden"])] * (layers - 1) + [n_cls]
            self.layers = nn.ModuleList(SAGEConv(dims[k], dims[k + 1], "mean") for k in range(layers))
            self.drop = nn.Dropout(float(s["dropout"]))

        def forward(self, blocks, h):  # type: ignore[no-untyped-def]
            for k, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
                h = layer(block, h)
                if k != layers - 1:
                    h = self.drop(F.relu(h))
            return h

    return SAGE()


def trainer(out_dir, s):  # type: ignore[no-untyped-def]
    import dgl
    import torch
    import torch.nn.functional as F

    dgl.distributed.initialize(os.environ["DGL_IP_CONFIG"])  # a server never returns
    torch.distributed.init_process_group("gloo")
    torch.manual_seed(int(s["seed"]))
    dgl.seed(int(s["seed"]) + torch.distributed.get_rank())
    g = dgl.distributed.DistGraph(GRAPH)
    rank = torch.distributed.get_rank()
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    init = torch.load(os.path.join(os.path.dirname(os.environ["DGL_CONF_PATH"]), "init.pt"))
    n_cls = int(init[f"layers.{int(s['layers']) - 1}.fc_self.weight"].shape[0])
    model = make_model(g.ndata["feat"].shape[1], n_cls, s)
    model.load_state_dict(init, strict=True)
    model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=float(s["lr"]))
    sampler = dgl.dataloading.NeighborSampler(list(reversed(s["fanouts"])))
    loader = dgl.dataloading.DistNodeDataLoader(g, train_nid, sampler, batch_size=int(s["batch_size"]),
                                                shuffle=True, drop_last=False)
    epochs = []
    for ep in range(int(s["epochs"])):
        model.train()
        t0 = time.perf_counter()
        loss_sum, examples, steps = 0.0, 0, 0
        for inp, outp, blocks in loader:
            xb, yb = g.ndata["feat"][inp], g.ndata["label"][outp]
            loss = F.cross_entropy(model(blocks, xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(loss) * int(yb.numel())
            examples += int(yb.numel())
            steps += 1
        epoch_s = time.perf_counter() - t0
        correct = total = 0
        if (ep + 1) % int(s["eval_every"]) == 0 or ep == int(s["epochs"]) - 1:
            model.eval()
            with torch.no_grad():
                for inp, outp, blocks in dgl.dataloading.DistNodeDataLoader(
                        g, test_nid, sampler, batch_size=4096, shuffle=False):
                    pred = model(blocks, g.ndata["feat"][inp]).argmax(-1)
                    correct += int((pred == g.ndata["label"][outp]).sum())
                    total += int(outp.numel())
        epochs.append({"epoch": ep, "epoch_s": epoch_s, "steps": steps,
                       "loss": loss_sum / max(1, examples), "test_correct": correct,
                       "test_total": total})
        print(f"[trainer {rank}] epoch {ep}: {epoch_s:.2f} s, loss {epochs[-1]['loss']:.3f}, "
              f"test {correct}/{total}", flush=True)
    with open(os.path.join(out_dir, f"trainer{rank}.json"), "w") as f:
        json.dump({"rank": rank, "epochs": epochs, "train_nodes": int(len(train_nid)),
                   "dgl": dgl.__version__, "torch": torch.__version__}, f)
    torch.distributed.barrier()
    dgl.distributed.exit_client()  # the servers exit with their clients (DGL_KEEP_ALIVE=0)


def _sh(cmd):  # type: ignore[no-untyped-def]
    return subprocess.run(cmd, shell=True, capture_output=True, text=True)


def absent_reason():  # type: ignore[no-untyped-def]
    if os.geteuid() != 0:
        return "the multi-machine launch needs root (network and mount namespaces)"
    for tool in ("unshare", "ip"):
        if not shutil.which(tool):
            return f"the multi-machine launch needs {tool!r} on PATH"
    if SUBNET in _sh("ip -4 addr; ip -4 route").stdout or _sh(f"ip link show {BRIDGE}").returncode == 0:
        return f"{SUBNET}0/24 or {BRIDGE} is already in use on this host"
    return None


def launch(npz, out_dir, s):  # type: ignore[no-untyped-def]
    reason = absent_reason()
    if reason:
        print(f"ABSENT {reason}", flush=True)
        return 3
    machines = int(s.get("machines", 2))
    os.makedirs(out_dir, exist_ok=True)
    parts_dir = os.path.join(out_dir, "parts")
    part_s = partition(npz, parts_dir, machines)
    print(f"partition_graph: {part_s:.1f} s", flush=True)
    ips = [SUBNET + str(m + 1) for m in range(machines)]
    port = 31050 + os.getpid() % 1000
    ipc = os.path.join(out_dir, "ip_config.txt")
    with open(ipc, "w") as f:
        f.writelines(f"{ip} {port}\n" for ip in ips)
    common = dict(DGL_IP_CONFIG=ipc, DGL_NUM_SERVER="1", DGL_NUM_CLIENT=str(machines),
                  DGL_CONF_PATH=os.path.join(parts_dir, f"{GRAPH}.json"), DGL_GRAPH_FORMAT="csc",
                  DGL_NUM_SAMPLER="0", DGL_KEEP_ALIVE="0", OMP_NUM_THREADS="1",
                  PYTHONUNBUFFERED="1", DGLBACKEND="pytorch")
    role = f"{sys.executable} {os.path.abspath(__file__)} role {npz} {out_dir} '{json.dumps(s)}'"
    procs, logs = [], []
    t0 = time.time()
    rcs: list[int | str] = []
    try:
        r = _sh(f"ip link add {BRIDGE} type bridge && ip addr add {ips[0]}/24 dev {BRIDGE} && "
                f"ip link set {BRIDGE} up")
        if r.returncode != 0:
            raise RuntimeError(f"bridge setup failed: {r.stderr.strip()}")
        for m in [*range(1, machines), 0]:  # machine 0 last: the others' servers must be up
            srv = dict(common, DGL_ROLE="server", DGL_SERVER_ID=str(m))
            cli = dict(common, DGL_ROLE="client", DGL_DIST_MODE="distributed", DGL_GROUP_ID="0",
                       MASTER_ADDR=ips[0], MASTER_PORT=str(port + 100), RANK=str(m),
                       WORLD_SIZE=str(machines), LOCAL_RANK="0",
                       GLOO_SOCKET_IFNAME=BRIDGE if m == 0 else NS_IF)
            net = ""
            if m:
                net = (f"ip link set lo up; for i in $(seq 100); do ip link show {NS_IF} "
                       f">/dev/null 2>&1 && break; sleep 0.1; done; ip addr add {ips[m]}/24 dev "
                       f"{NS_IF} && ip link set {NS_IF} up; ")
            env = " ".join(f"{k}={v}" for k, v in srv.items())
            envc = " ".join(f"{k}={v}" for k, v in cli.items())
            script = (f"mount -t tmpfs -o size=8g tmpfs /dev/shm; {net}env {env} {role} & sleep 8; "
                      f"env {envc} {role}; wait")
            logf = open(os.path.join(out_dir, f"launch_m{m}.log"), "w")
            logs.append(logf)
            ns = ["--net"] if m else []
            p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", *ns, "bash", "-c",
                                  script], stdout=logf, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            procs.append(p)
            if m:
                time.sleep(0.5)
                r = _sh(f"ip link add gtdgl{m} type veth peer name {NS_IF} netns {p.pid} && "
                        f"ip link set gtdgl{m} master {BRIDGE} && ip link set gtdgl{m} up")
                if r.returncode != 0:
                    raise RuntimeError(f"veth setup failed for machine {m}: {r.stderr.strip()}")
        for p in procs:
            try:
                rcs.append(p.wait(timeout=max(1, float(s["timeout_s"]) - (time.time() - t0))))
            except subprocess.TimeoutExpired:
                rcs.append("timeout")
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
                p.wait()
        for m in range(1, machines):
            _sh(f"ip link del gtdgl{m}")
        _sh(f"ip link del {BRIDGE}")
        for f in logs:
            f.close()
    print(f"launch exit codes {rcs}, wall {time.time() - t0:.0f} s", flush=True)
    missing = [r for r in range(machines) if not os.path.exists(os.path.join(out_dir, f"trainer{r}.json"))]
    if missing:
        for m in range(machines):
            with open(os.path.join(out_dir, f"launch_m{m}.log")) as f:
                sys.stdout.write("".join(f"  m{m}| {ln}" for ln in f.readlines()[-15:]))
        return 1
    return 0


def main():  # type: ignore[no-untyped-def]
    cmd, npz, out_dir, raw = sys.argv[1:5]
    s = json.loads(raw)
    if cmd == "role":
        return trainer(out_dir, s)
    if cmd == "launch":
        return launch(npz, out_dir, s)
    raise SystemExit(f"unknown command {cmd!r}: expected launch")


if __name__ == "__main__":
    sys.exit(main())

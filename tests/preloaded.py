"""ns-train, ns-eval and ``python -m`` commands, alone or as the ranks of a torchrun, run in processes forked from
one that has already imported torch and nerfstudio.

A fresh ns-train spends about 9 s of CPU before it reads its arguments: importing torch and nerfstudio, and
nerfstudio's registration of its external methods (an ``inspect.stack()`` for each, walking every loaded module).
The suite's tiny runs train for a few seconds, so most of their time went there, once per rank. A fork of a process
that has done those imports starts at once and runs the same entry point with the same arguments, environment and
working directory, and exits as the command would (exit status, atexit handlers, a traceback on stderr).

A torchrun of ``--nproc-per-node N --master-port P`` becomes N forked ranks with the environment torchrun gives its
workers (ranks, world size, the master's address; ``OMP_NUM_THREADS=1`` unless set), joined by rank 0's store
instead of the agent's; as torchrun, the first rank to fail has the others terminated, and the run exits 1. Tests of
what the launcher itself does (a rank dying, a signal, two nodes, the viewer) start torchrun as users do.

Run as a script, this module is the preloaded process: it reads one request per line on stdin (JSON), forks one
child per rank, and reports their pids and then their exit statuses on the file descriptor named by its argument.
``PreloadedCommands`` is the client the tests use."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

CONSOLE_SCRIPTS = {"ns-train": "nerfstudio.scripts.train", "ns-eval": "nerfstudio.scripts.eval"}
"""Console scripts served, by name: each module's ``entrypoint()`` is what the script calls."""

TORCHRUN = ("-m", "torch.distributed.run", "--nproc-per-node")
"""How the tests' torchrun command starts (``training.torchrun``): then N, ``--master-port``, the port, the command."""

TERMINATE_GRACE_S = 30
"""How long ranks told to stop (SIGTERM, after a peer failed) may take before they are killed, as torchrun allows."""


def _serve(reply_fd: int) -> Optional[dict]:
    """Answer requests until stdin closes (returns None), or return the request, as one rank's, in a forked child."""
    import importlib

    environment = dict(os.environ)
    for module in CONSOLE_SCRIPTS.values():
        importlib.import_module(module)
    # what the imports set by default in the environment (odin_ns.comm.context: NCCL's watchdog settings) they would
    # set in a fresh process too, where the command's environment lacks it
    set_on_import = {name: value for name, value in os.environ.items() if name not in environment}
    # A fork copies no thread, and a lock another Python thread held would stay held in the child: refuse then, and
    # the client starts processes itself. The BLAS pools that numpy and scipy start shut down around a fork
    # (pthread_atfork), as multiprocessing's fork start method relies on.
    ready = threading.active_count() == 1
    _report(reply_fd, ready=ready)
    if not ready:
        return None
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        children = {}
        for rank, rank_env in enumerate(request["rank_envs"]):
            pid = os.fork()
            if pid == 0:
                os.close(reply_fd)
                return dict(request, env={**set_on_import, **request["env"], **rank_env}, rank=rank)
            children[pid] = rank
        _report(reply_fd, pids=list(children))
        _report(reply_fd, returncodes=_wait(children))
    return None


def _wait(children: Dict[int, int]) -> List[int]:
    """Exit statuses by rank; once one rank fails, the others are terminated, then killed after the grace."""
    codes: List[Optional[int]] = [None] * len(children)
    deadline = None
    while None in codes:
        pid, status = os.waitpid(-1, os.WNOHANG if deadline is not None else 0)
        if pid == 0:
            if time.monotonic() > deadline:
                for other, rank in children.items():
                    if codes[rank] is None:
                        os.kill(other, signal.SIGKILL)
            time.sleep(0.05)
            continue
        codes[children[pid]] = os.waitstatus_to_exitcode(status)
        if codes[children[pid]] != 0 and deadline is None:
            deadline = time.monotonic() + TERMINATE_GRACE_S
            for other, rank in children.items():
                if codes[rank] is None:
                    os.kill(other, signal.SIGTERM)
    return codes


def _report(reply_fd: int, **fields) -> None:
    os.write(reply_fd, (json.dumps(fields) + "\n").encode())


def _become(request: dict) -> None:
    """Turn this forked child into the command (stdin from /dev/null, as the tests run commands without input)."""
    import importlib
    import runpy

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"][request["rank"]]), (2, request["stderr"][request["rank"]])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if "OMP_NUM_THREADS" in os.environ:  # OpenMP read it when torch loaded; a fresh process would start with it
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    command = request["command"]
    if command[0] == "-m":
        sys.argv = list(command[1:])
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(command)
        # odin_ns's method registration installs its one-line refusal of invalid choices when sys.argv trains
        # odin-splatfacto; it ran here under this process's own arguments, so it is done now, as it would have been
        from odin_ns.parse_errors import say_invalid_choices_in_one_line

        say_invalid_choices_in_one_line()
        sys.exit(importlib.import_module(CONSOLE_SCRIPTS[Path(command[0]).name]).entrypoint())


def _rank_envs(command: Sequence[str]) -> Tuple[Sequence[str], List[Dict[str, str]]]:
    """The command each rank runs and each rank's added environment (one empty one for a single process), or
    ``((), [])`` for a command it does not serve."""
    ranks: List[Dict[str, str]] = [{}]
    if tuple(command[:4]) == (sys.executable, *TORCHRUN) and len(command) > 7 and command[5] == "--master-port":
        world, port, command = int(command[4]), command[6], command[7:]
        ranks = [dict(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0", ROLE_RANK=str(rank), ROLE_NAME="default",
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), GROUP_WORLD_SIZE="1",
                      ROLE_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                      TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_MAX_RESTARTS="0", TORCHELASTIC_RUN_ID="none")
                 for rank in range(world)]
    elif tuple(command[:2]) == (sys.executable, "-m") and command[2] != TORCHRUN[1]:  # other torchruns: as they are
        command = command[1:]
    if command[0] == "-m":
        return command, ranks
    console_script = Path(command[0])
    if console_script.name in CONSOLE_SCRIPTS and console_script.parent == Path(sys.executable).parent:
        return command, ranks
    return (), []


class PreloadedCommands:
    """Client of one preloaded process, started on first use. ``run`` returns what ``subprocess.run`` with
    ``capture_output=True, text=True`` would (a torchrun's ranks' outputs one after another), or None where the
    command is not one it serves or the process could not be made safe to fork: the caller then starts it itself."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._process: Optional[subprocess.Popen] = None
        self._replies = -1
        self._pending = b""
        self._usable = True
        self._count = 0

    def _start(self) -> bool:
        if self._process is None and self._usable:
            read_fd, write_fd = os.pipe()
            with open(self._scratch / "preloaded.log", "w") as log:  # its own output: the imports' warnings
                self._process = subprocess.Popen([sys.executable, __file__, str(write_fd)], stdin=subprocess.PIPE,
                                                 stdout=log, stderr=log, pass_fds=(write_fd,), text=True)
            os.close(write_fd)
            self._replies = read_fd
            self._usable = bool(self._reply(timeout=300).get("ready"))
        return self._usable

    def _reply(self, timeout: float) -> dict:
        """The next line the preloaded process reports ({} if it closed its end); TimeoutError after ``timeout``."""
        while b"\n" not in self._pending:
            if not select.select([self._replies], [], [], timeout)[0]:
                raise TimeoutError
            chunk = os.read(self._replies, 4096)
            if not chunk:
                return {}
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, command: Sequence[str], timeout: float, env: Dict[str, str]) -> Optional[subprocess.CompletedProcess]:
        rank_command, rank_envs = _rank_envs(command)
        if not rank_envs or not self._start():
            return None
        if len(rank_envs) > 1:
            env = {"OMP_NUM_THREADS": "1", **env}
        self._count += 1
        outs, errs = ([str(self._scratch / f"command_{self._count}_rank{rank}.{stream}") for rank in range(len(rank_envs))]
                      for stream in ("out", "err"))
        request = dict(command=list(rank_command), rank_envs=rank_envs, env=env, cwd=os.getcwd(), stdout=outs,
                       stderr=errs)
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        started = self._reply(timeout=60)
        if "pids" not in started:
            raise RuntimeError(f"the preloaded process has ended; its output is in {self._scratch / 'preloaded.log'}")
        pids = started["pids"]

        def read(paths: List[str]) -> str:
            return "".join(Path(path).read_text(errors="replace") for path in paths)

        try:
            codes = self._reply(timeout)["returncodes"]
        except TimeoutError:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            self._reply(timeout=60)
            raise subprocess.TimeoutExpired(list(command), timeout, read(outs), read(errs)) from None
        returncode = codes[0] if len(codes) == 1 else int(any(codes))
        return subprocess.CompletedProcess(list(command), returncode, read(outs), read(errs))

    def close(self) -> None:
        if self._process is not None:
            self._process.stdin.close()
            self._process.wait(timeout=60)
            os.close(self._replies)
            self._process = None


if __name__ == "__main__":
    _request = _serve(int(sys.argv[1]))
    if _request is not None:
        _become(_request)

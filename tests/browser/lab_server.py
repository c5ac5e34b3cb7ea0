"""A throwaway JupyterLab server for browser tests.

It runs with this interpreter (so its kernel is the project's environment), on 127.0.0.1 and a free
port, without a token, with its own config, data and runtime directories, news and update checks off.
It serves a copy of the notebooks, so that running them in the browser never rewrites committed files.
It is stopped by its process id, and so are the kernels it started (even if it left them behind),
and it ends with the test process even when that is killed.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from processes import end, family

PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# User settings: no news prompt, no update check, and every cell attached to the page (the tests
# read all prompts and outputs; the default windowing leaves off-screen cells out of the DOM).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


def server_config(root_dir: Path, port: int) -> dict:
    """The whole server configuration, written to the temporary config directory."""
    return {
        "ServerApp": {
            "ip": "127.0.0.1",
            "port": port,
            "port_retries": 0,
            "open_browser": False,
            "root_dir": str(root_dir),
            "allow_root": os.geteuid() == 0,
            "terminals_enabled": False,
            "disable_check_xsrf": True,  # no auth on 127.0.0.1 anyway; lets the tests shut kernels down over REST
        },
        "IdentityProvider": {"token": ""},
        "PasswordIdentityProvider": {"hashed_password": ""},
        "LabApp": {
            "news_url": None,
            "extension_manager": "readonly",
            "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
        },
    }


class LabServer:
    """A running JupyterLab; `url(path)` addresses a file under the served root, `stop()` ends it."""

    def __init__(self, sources: dict[str, Path]):
        """Serve a copy of each source directory (value) under its relative name (key)."""
        self.home = Path(tempfile.mkdtemp(prefix="tapekit-lab-"))
        self.root = self.home / "root"
        for name, source in sources.items():
            shutil.copytree(source, self.root / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        self.port = free_port()
        self.log_path = self.home / "server.log"
        self.process: subprocess.Popen | None = None

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def environment(self) -> dict[str, str]:
        """The server's environment: this one, with Jupyter's and IPython's directories in ``home``."""
        env = dict(os.environ)
        for name in ("config", "data", "runtime", "ipython"):
            (self.home / name).mkdir(exist_ok=True)
        env.update(
            JUPYTER_CONFIG_DIR=str(self.home / "config"),
            JUPYTER_DATA_DIR=str(self.home / "data"),
            JUPYTER_RUNTIME_DIR=str(self.home / "runtime"),
            IPYTHONDIR=str(self.home / "ipython"),
        )
        # The kernelspec and the lab extensions (jupyterlab_widgets) live under sys.prefix.
        prefix_share = str(Path(sys.prefix) / "share" / "jupyter")
        paths = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
        env["JUPYTER_PATH"] = os.pathsep.join([prefix_share, *paths])
        env.pop("JUPYTER_CONFIG_PATH", None)
        env.pop("MPLBACKEND", None)  # kernels draw with the inline backend, as in `make lab`
        return env

    def start(self) -> "LabServer":
        env = self.environment()
        config = Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
        config.write_text(json.dumps(server_config(self.root, self.port), indent=1))
        kernel_config = Path(env["IPYTHONDIR"]) / "profile_default" / "ipython_kernel_config.py"
        kernel_config.parent.mkdir(parents=True, exist_ok=True)
        # After an error, Run All's later cells must stay unrun. ipykernel aborts only the requests
        # already queued (a 0 s window): one that arrived a moment later ran, now and then.
        kernel_config.write_text("c.Kernel.stop_on_error_timeout = 5.0\n")
        for plugin, settings in LAB_SETTINGS.items():
            path = Path(env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jupyterlab"], cwd=self.root, env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C reaches pytest, which stops the server, not the server itself
                preexec_fn=end_with_parent)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with status {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"JupyterLab did not answer within {START_TIMEOUT_S:.0f} s:\n{self.log()}")

    def log(self, tail: int | None = 4000) -> str:
        """The server's output, its last ``tail`` characters (all of it for ``None``)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text if tail is None else text[-tail:]

    def stop(self) -> None:
        """SIGTERM the server (it shuts its kernels down); SIGKILL by id whatever of it is left after a grace period."""
        if self.process is not None:
            processes = family(self.process.pid)
            self.process.terminate()
            end(processes, STOP_TIMEOUT_S)
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "LabServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def end_with_parent() -> None:
    """In the child before exec: have Linux send SIGTERM when the test process dies, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


"""launch --no_store: no store of the launcher's and no PADDLE_STORE_HOSTED, a free
MASTER_PORT that rank 0 binds (plain env://, as torch's init_process_group expects)."""
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import os, sys
assert "PADDLE_STORE_HOSTED" not in os.environ, os.environ.get("PADDLE_STORE_HOSTED")
import socket
port = int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.close()   # the port is free for rank 0
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "port", port)
"""


def test_no_store_leaves_the_port_to_rank_0():
    launch = os.environ.get("PADDLE_LIKE_LAUNCH")
    if not launch or not os.path.exists(launch):
        pytest.skip("PADDLE_LIKE_LAUNCH is not set")
    proc = subprocess.run([launch, "--nproc_per_node", "2", "--no_store", "--",
                           sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "store left to rank 0" in proc.stderr + proc.stdout
    assert proc.stdout.count("of 2 port") == 2

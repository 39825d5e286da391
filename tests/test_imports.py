import subprocess
import sys


def test_import_pivot_envs_stays_light():
    code = (
        "import sys, gymnasium as gym, pivot_envs; env = gym.make('pivot/tool-use-v0'); env.reset(seed=0); "
        "env.step(''); heavy = [m for m in ('torch', 'transformers', 'docker', 'ray', 'vllm', 'trl') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"heavy modules imported by the env path: {proc.stdout.strip()}"

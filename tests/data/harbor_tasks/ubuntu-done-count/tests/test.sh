#!/bin/bash
# pip-installed test tools and a test-time apt package (bc); the reward goes to reward.json, which
# Harbor reads before reward.txt (here a stale default that must be ignored).

apt-get update
apt-get install -y bc
pip install --break-system-packages pytest==8.4.1 pytest-json-ctrf==0.3.5

echo 0 > /logs/verifier/reward.txt
cd /app
python3 -m pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then
  echo '{"reward": 1.0, "label": "solved"}' > /logs/verifier/reward.json
else
  echo '{"reward": 0.0, "label": "unsolved"}' > /logs/verifier/reward.json
fi

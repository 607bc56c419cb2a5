#!/bin/bash
# The reward is 1 when the agent (Harbor's oracle: solution/solve.sh) wrote
# the answer in a sandbox of the template built from environment/Dockerfile.
if [ "$(cat /tmp/answer.txt)" = "hello from msb" ] && [ "$(cat /opt/hello/marker)" = built ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi

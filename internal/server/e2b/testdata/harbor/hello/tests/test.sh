#!/bin/bash
# The reward is 1 when the agent (Harbor's oracle: solution/solve.sh) wrote the answer.
if [ "$(cat /tmp/answer.txt)" = "hello from msb" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi

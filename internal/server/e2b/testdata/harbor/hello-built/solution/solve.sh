#!/bin/bash
echo 'hello from msb' > /tmp/answer.txt

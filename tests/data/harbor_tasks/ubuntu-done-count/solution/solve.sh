#!/bin/bash
jq '[.[] | select(.status == "done")] | length' /app/tasks.json > /app/done.txt

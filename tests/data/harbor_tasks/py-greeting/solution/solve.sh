#!/bin/bash
set -e
echo "hello, harbor" > /app/greeting.txt

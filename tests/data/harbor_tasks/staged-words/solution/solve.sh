#!/bin/bash
grep -cx gamma /app/words.txt > /app/gamma.txt

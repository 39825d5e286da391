#!/bin/bash
python3 -c "import urllib.request; print(urllib.request.urlopen('http://server:8000/greeting', timeout=5).read().decode(), end='')" > /app/greeting.txt

import urllib.request
from pathlib import Path


def test_the_server_answers_by_its_name():
    assert urllib.request.urlopen("http://server:8000/greeting", timeout=5).read() == b"hello from server\n"


def test_the_greeting_was_saved():
    assert Path("/app/greeting.txt").read_text() == "hello from server\n"

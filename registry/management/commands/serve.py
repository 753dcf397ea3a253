import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

WELCOME_FILE = "welcome.txt"  # written by `load_demo --welcome`


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and beat together; Ctrl-C stops all three."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument(
            "--welcome",
            action="store_true",
            help="Send the worker's and beat's logs to var/log/ and, once the web server "
            "answers, print var/welcome.txt (logins, token) as the last lines, then delete it.",
        )

    def handle(self, *args, addr, welcome=False, **options):
        python = sys.executable
        commands = {
            "worker": [python, "-m", "celery", "-A", "config", "worker", "--loglevel=INFO",
                       "--concurrency=1"],
            "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO"],
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
        }  # fmt: skip
        logs = Path(settings.VAR_DIR) / "log"
        outputs = {}
        if welcome:
            logs.mkdir(exist_ok=True)
            for name in ("worker", "beat"):
                outputs[name] = (logs / f"{name}.log").open("ab")
        processes = {
            name: subprocess.Popen(
                command,
                stdout=outputs.get(name),
                stderr=subprocess.STDOUT if name in outputs else None,
            )
            for name, command in commands.items()
        }
        self.stdout.write(f"Serving admin and API at http://{addr} (Ctrl-C stops)")
        if welcome:
            self._welcome(addr, logs, processes["web"])
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
        try:
            while all(process.poll() is None for process in processes.values()):
                time.sleep(0.5)
            stopped = [name for name, process in processes.items() if process.poll() is not None]
            self.stderr.write(f"{', '.join(stopped)} stopped; stopping the rest.")
        except KeyboardInterrupt:
            pass
        finally:
            for output in outputs.values():
                output.close()
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()
            deadline = time.monotonic() + 15
            for process in processes.values():
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()

    def _welcome(self, addr: str, logs: Path, web: subprocess.Popen) -> None:
        """Wait until the web server accepts connections, then print the welcome last."""
        host, _, port = addr.rpartition(":")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and web.poll() is None:
            try:
                socket.create_connection((host or "127.0.0.1", int(port)), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        time.sleep(0.3)  # let the server finish its own start-up lines
        path = Path(settings.VAR_DIR) / WELCOME_FILE
        lines = path.read_text().splitlines() if path.exists() else []
        path.unlink(missing_ok=True)  # it holds a token: print it once
        rule = "─" * 78
        self.stdout.write(rule)
        self.stdout.write(f"Worker and beat log to {logs}/; requests are logged below.")
        for line in lines:
            self.stdout.write(self.style.SUCCESS(line))
        self.stdout.write(rule)
        self.stdout.flush()

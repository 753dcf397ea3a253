import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and beat together; Ctrl-C stops all three."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000")

    def handle(self, *args, addr, **options):
        python = sys.executable
        commands = {
            "worker": [python, "-m", "celery", "-A", "config", "worker", "--loglevel=INFO",
                       "--concurrency=1"],
            "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO"],
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
        }  # fmt: skip
        processes = {name: subprocess.Popen(command) for name, command in commands.items()}
        self.stdout.write(f"Serving admin and API at http://{addr} (Ctrl-C stops)")
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
        try:
            while all(process.poll() is None for process in processes.values()):
                time.sleep(0.5)
            stopped = [name for name, process in processes.items() if process.poll() is not None]
            self.stderr.write(f"{', '.join(stopped)} stopped; stopping the rest.")
        except KeyboardInterrupt:
            pass
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()
            deadline = time.monotonic() + 15
            for process in processes.values():
                try:
                    process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

WELCOME_FILE = "welcome.txt"  # written by `load_demo --welcome`


class Command(BaseCommand):
    help = (
        "Run the web server, a Celery worker, beat and the MCP gateway together; Ctrl-C stops "
        "them all."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr",
            default="127.0.0.1:8000",
            help="Where the web server listens: [host:]port, as runserver takes it "
            "(default 127.0.0.1:8000). `make run PORT=8001` passes 127.0.0.1:8001.",
        )
        parser.add_argument(
            "--gateway",
            default=None,
            help="Where the MCP gateway listens: [host:]port (default: the web server's host, "
            "its port + 1, so 127.0.0.1:8001 beside 127.0.0.1:8000).",
        )
        parser.add_argument(
            "--welcome",
            action="store_true",
            help="Send the worker's and beat's logs to var/log/ and, once the web server "
            "answers, print var/welcome.txt (logins, token) as the last lines, then delete it.",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="Only check that --addr is free (exit status 1 if not), start nothing.",
        )

    def handle(self, *args, addr, gateway=None, welcome=False, check=False, **options):
        host, port = address_split(addr)
        gateway_host, gateway_port = address_split(gateway or f"{host}:{port + 1}")
        # Before anything starts or prints: a taken port would print the logins and the token
        # of a server that never comes up.
        address_check_free(host, port)
        address_check_free(gateway_host, gateway_port)
        if check:
            return
        commands = processes_commands(
            python=sys.executable, addr=addr, gateway=f"{gateway_host}:{gateway_port}"
        )
        logs = Path(settings.VAR_DIR) / "log"
        outputs = {}
        if welcome:
            logs.mkdir(exist_ok=True)
            for name in ("worker", "beat", "gateway"):
                outputs[name] = (logs / f"{name}.log").open("ab")
        processes = {
            name: subprocess.Popen(
                command,
                stdout=outputs.get(name),
                stderr=subprocess.STDOUT if name in outputs else None,
            )
            for name, command in commands.items()
        }
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
        stopped: list[str] = []
        try:
            if self._wait_until_up(host, port, processes["web"]):
                self.stdout.write(f"Serving admin and API at http://{addr} (Ctrl-C stops)")
                self.stdout.write(
                    f"MCP gateway at http://{gateway_host}:{gateway_port}/mcp/ (a runtime token "
                    "with the tools:call scope)"
                )
                if welcome:
                    self._welcome(addr, logs)
                while all(process.poll() is None for process in processes.values()):
                    time.sleep(0.5)
            stopped = [name for name, process in processes.items() if process.poll() is not None]
            self.stderr.write(f"{', '.join(stopped) or 'web'} stopped; stopping the rest.")
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
        if stopped:
            raise CommandError(f"{', '.join(stopped)} stopped")

    def _wait_until_up(self, host: str, port: int, web: subprocess.Popen[bytes]) -> bool:
        """Whether the web server accepts connections (False once it exited or after 60 s)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and web.poll() is None:
            try:
                socket.create_connection((host, port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.2)
        return False

    def _welcome(self, addr: str, logs: Path) -> None:
        """Print the welcome last, once the web server answers, with its real address."""
        time.sleep(0.3)  # let the server finish its own start-up lines
        path = Path(settings.VAR_DIR) / WELCOME_FILE
        text = path.read_text() if path.exists() else ""
        lines = text.replace("{address}", addr).splitlines()
        path.unlink(missing_ok=True)  # it holds a token: print it once
        rule = "─" * 78
        self.stdout.write(rule)
        self.stdout.write(f"Worker, beat and gateway log to {logs}/; requests are logged below.")
        for line in lines:
            self.stdout.write(self.style.SUCCESS(line))
        self.stdout.write(rule)
        self.stdout.flush()


def processes_commands(*, python: str, addr: str, gateway: str) -> dict[str, list[str]]:
    """The four processes: one worker consumes every queue here (CELERY_TASK_QUEUES), where
    production runs one worker per queue (docker-compose.yml); the MCP gateway at ``gateway``."""
    queues = ",".join(queue.name for queue in settings.CELERY_TASK_QUEUES)
    return {
        "worker": [python, "-m", "celery", "-A", "config", "worker", "--loglevel=INFO",
                   "--concurrency=1", f"--queues={queues}"],
        "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel=INFO"],
        "web": [python, "manage.py", "runserver", addr, "--noreload"],
        "gateway": [python, "manage.py", "mcp_gateway", "--bind", gateway],
    }  # fmt: skip


def address_split(addr: str) -> tuple[str, int]:
    """(host, port) of ``[host:]port`` as runserver reads it; a bad one is a clear error."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"--addr {addr!r}: expected [host:]port, e.g. 127.0.0.1:8001")
    return host, int(port)


def address_check_free(host: str, port: int) -> None:
    """Refuse at once when something already listens on the address."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        # As the server will: a port left in TIME_WAIT is free, one with a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"cannot listen on {host}:{port}: {exc.strerror}. Stop what uses it, or "
                f"choose another port: make run PORT={port + 1}"
            ) from None

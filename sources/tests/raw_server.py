"""A stand-in MCP server that sends its tools as raw JSON, written without any SDK.

Run as ``python raw_server.py TOOLS.json``: ``tools/list`` answers with the file's list of
tools byte for byte as the file holds them (keys no SDK model knows included, such as
``annotations.category``), so a test can compare a pin with the hash of exactly what was sent;
``${NAME}`` in the file is replaced by the server's environment variable NAME.
Only what a listing needs is spoken: ``initialize``, ``ping`` and ``tools/list`` over stdio.
"""

import json
import os
import re
import sys
from pathlib import Path

TOOLS = Path(sys.argv[1])
VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}")
SERVER_INFO = {"name": "raw-stand-in", "version": "1.2.3"}


def answer(message: dict) -> dict | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        version = (message.get("params") or {}).get("protocolVersion", "2025-06-18")
        result: dict = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        # The file's own text, not a re-serialisation of it.
        listed = VARIABLE.sub(lambda match: os.environ.get(match[1], ""), TOOLS.read_text())
        head = '{"jsonrpc": "2.0", "id": ' + json.dumps(ident)
        return {"raw": head + ', "result": {"tools": ' + listed + "}}"}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "unknown"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            text = reply["raw"] if "raw" in reply else json.dumps(reply)
            sys.stdout.write(text.replace("\n", " ") + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

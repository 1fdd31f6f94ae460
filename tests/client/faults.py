"""A fault-injecting HTTP proxy in front of the real API, for the client's retry and
reconnection tests: it answers 429 (with Retry-After) or 503, drops the connection before
or after forwarding, stalls, or cuts an event stream after some events, as many times as a
rule says, then forwards. It records every request it saw (method, path, headers, when).

One request per connection (``Connection: close`` both ways): what the client sees of a
fault is exactly what the rule says, never a pooled connection closed under it.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass, field

Action = str  # "429" | "503" | "drop" | "drop_after" | "stall" | "cut_stream"


@dataclass
class Rule:
    method: str
    path: str  # a regex the request path (without the query) must fully match
    action: Action
    times: int = 1
    retry_after: str | None = None  # the Retry-After header of a 429/503
    events: int = 1  # cut_stream: forward this many events, then close

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and method == self.method and re.fullmatch(self.path, path) is not None


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    action: Action | None


@dataclass
class FaultProxy:
    upstream_port: int
    rules: list[Rule] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def start(self) -> FaultProxy:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *rules: Rule) -> None:
        self.rules.extend(rules)

    def requests(self, method: str, path: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and re.fullmatch(path, s.path)]

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)

    def _run(self, ready: threading.Event) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            async with server:
                await self._stopped.wait()
        asyncio.run(main())

    def _rule(self, method: str, path: str) -> Rule | None:
        for rule in self.rules:
            if rule.matches(method, path):
                rule.times -= 1
                return rule
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            path = target.split("?", 1)[0]
            rule = self._rule(method, path)
            self.seen.append(Seen(method, path, headers, body, time.monotonic(), rule.action if rule else None))
            if rule is not None and rule.action in ("429", "503"):
                await self._answer(writer, int(rule.action), rule.retry_after)
            elif rule is not None and rule.action == "drop":
                pass  # close without a word: the request never reached the API
            elif rule is not None and rule.action == "stall":
                await asyncio.sleep(30)  # longer than any client timeout of the tests
            else:
                await self._forward(lines, body, writer, rule)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, retry_after: str | None) -> None:
        body = b'{"error":{"code":"injected","message":"a fault the test proxy injected"}}'
        reason = {429: "Too Many Requests", 503: "Service Unavailable"}[status]
        extra = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     f"{extra}Connection: close\r\n\r\n".encode() + body)
        await writer.drain()

    async def _forward(self, lines: list[str], body: bytes, writer: asyncio.StreamWriter, rule: Rule | None) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        kept = [line for line in lines[1:] if line and not line.lower().startswith("connection:")]
        upstream_writer.write(("\r\n".join([lines[0], *kept, "Connection: close", "", ""])).encode("latin-1") + body)
        await upstream_writer.drain()
        try:
            if rule is not None and rule.action == "drop_after":
                await upstream_reader.read()  # the API did the work; its answer is lost
                return
            events = 0
            while chunk := await upstream_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
                if rule is not None and rule.action == "cut_stream":
                    events += len(re.findall(rb"(?m)^id: ", chunk))
                    if events >= rule.events:
                        return  # the connection drops mid-stream
        finally:
            upstream_writer.close()

#!/usr/bin/env python3
"""A TCP proxy that delays every byte by DELAY_MS in each direction.

`tc netem` does not exist on the test machines' kernel (shared/RELIABILITY.md),
so latency comes from this: each chunk read on one side is written to the
other DELAY_MS later, in order (a per-direction queue), like a long link.
TLS passes through untouched. Prints "listening" once ready.

  delay-proxy.py LISTEN_HOST:PORT TARGET_HOST:PORT DELAY_MS
"""
import asyncio
import sys
import time


async def pump(reader, writer, delay_s):
    queue = asyncio.Queue()

    async def sender():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        try:
            writer.write_eof()
        except OSError:
            pass

    task = asyncio.create_task(sender())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((time.monotonic() + delay_s, data))
    except OSError:
        pass
    queue.put_nowait((time.monotonic() + delay_s, None))
    try:
        await task
    except OSError:
        pass


async def main():
    listen, target, delay_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
    lhost, lport = listen.rsplit(":", 1)
    thost, tport = target.rsplit(":", 1)
    delay_s = delay_ms / 1000

    async def handle(creader, cwriter):
        try:
            sreader, swriter = await asyncio.open_connection(thost, int(tport))
        except OSError:
            cwriter.close()
            return
        await asyncio.gather(pump(creader, swriter, delay_s),
                             pump(sreader, cwriter, delay_s))
        for w in (cwriter, swriter):
            w.close()

    server = await asyncio.start_server(handle, lhost, int(lport))
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())

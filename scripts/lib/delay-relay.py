#!/usr/bin/env python3
"""delay-relay.py LISTEN_HOST:PORT TARGET_HOST:PORT DELAY_MS [LISTEN:TARGET:DELAY ...]

A TCP relay that holds every chunk for DELAY_MS milliseconds in each direction, in order: what
`tc qdisc ... netem delay` would add to a link, for kernels without netem (scripts/multihost.sh
runs one in each server's network namespace, in front of the server on that namespace's loopback).
Half-closes are passed on (EOF after the delay), resets close both sides. Standard library only.

Usage: delay-relay.py 10.88.0.2:6379 127.0.0.1:6379 2
Several relays in one process: further arguments in threes. Prints "delay-relay ready" once
every listener is bound.
"""
import asyncio
import socket
import sys

CHUNK = 256 * 1024
QUEUED_CHUNKS = 512  # back-pressure: the reader waits once this many chunks are held


def split_address(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


async def pump(reader, writer, delay, loop):
    """Copies reader to writer, each chunk written `delay` seconds after it was read."""
    queue = asyncio.Queue(QUEUED_CHUNKS)

    async def read_side():
        try:
            while True:
                data = await reader.read(CHUNK)
                await queue.put((loop.time() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time(), None))

    async def write_side():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:  # the source was reset: reset the destination too
                writer.transport.abort()
                return
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    reading = asyncio.ensure_future(read_side())
    try:
        await write_side()
    finally:
        reading.cancel()


async def relay(client_reader, client_writer, target, delay):
    loop = asyncio.get_running_loop()
    try:
        server_reader, server_writer = await asyncio.open_connection(*target)
    except OSError as error:
        print(f"delay-relay: cannot reach {target[0]}:{target[1]}: {error}", file=sys.stderr, flush=True)
        client_writer.transport.abort()
        return
    for writer in (client_writer, server_writer):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    directions = [
        asyncio.ensure_future(pump(client_reader, server_writer, delay, loop)),
        asyncio.ensure_future(pump(server_reader, client_writer, delay, loop)),
    ]
    try:
        done, pending = await asyncio.wait(directions, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()
        await asyncio.gather(*pending)
    except (ConnectionError, OSError):
        pass
    finally:
        for task in directions:
            task.cancel()
        for writer in (client_writer, server_writer):
            writer.transport.abort()


async def main(arguments):
    if not arguments or len(arguments) % 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    servers = []
    for i in range(0, len(arguments), 3):
        listen = split_address(arguments[i])
        target = split_address(arguments[i + 1])
        delay = float(arguments[i + 2]) / 1000

        def handler(r, w, target=target, delay=delay):
            return relay(r, w, target, delay)

        try:
            servers.append(await asyncio.start_server(handler, *listen, reuse_address=True, backlog=512))
        except OSError as error:
            print(f"delay-relay: cannot listen on {listen[0]}:{listen[1]}: {error}", file=sys.stderr, flush=True)
            sys.exit(1)
    print("delay-relay ready", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except KeyboardInterrupt:
        pass

// Drive msb's E2B front end with the real e2b npm SDK, unchanged: the caller
// sets E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY. Each step asserts what
// it saw; the first failure throws, so the script exits non-zero with the
// step's message, which e2b_test.go (TestE2BNodeSDK) reports.
import assert from 'node:assert/strict'
import { CommandExitError, NotFoundError, Sandbox } from 'e2b'

const sb = await Sandbox.create({ metadata: { suite: 'e2b-node-test' }, envs: { GREETING: 'hello' }, timeoutMs: 120_000 })
try {
  await roundTrip(sb)
} finally {
  await sb.kill()
}
await autoPause()
const left = await Sandbox.list({ query: { metadata: { suite: 'e2b-node-test' } } }).nextItems()
assert.equal(left.length, 0, 'Sandbox.list() after every sandbox was killed')
console.log('ok')

async function roundTrip (sb) {
  await commands(sb)
  await files(sb)
  await watchAndList(sb)
  await lifecycle(sb)
}

// watchAndList: files.watchDir (the WatchDir stream), Sandbox.list's pages
// and getMetrics.
async function watchAndList (sb) {
  await sb.files.makeDir('/tmp/nw')
  const events = []
  const seen = (name, type) => events.some((e) => e.name === name && e.type === type)
  const h = await sb.files.watchDir('/tmp/nw', (e) => events.push(e), { recursive: true, timeoutMs: 0 })
  await sb.files.write('/tmp/nw/a.txt', 'a')
  await sb.commands.run('rm /tmp/nw/a.txt')
  for (let i = 0; i < 1500 && !seen('a.txt', 'remove'); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  await h.stop()
  assert.ok(seen('a.txt', 'create') && seen('a.txt', 'write') && seen('a.txt', 'remove'),
    `watchDir saw ${JSON.stringify(events)}, want a.txt create, write, remove`)

  const others = await Promise.all([1, 2].map(() => Sandbox.create({ metadata: { suite: 'e2b-node-test' }, timeoutMs: 120_000 })))
  try {
    const pages = Sandbox.list({ query: { metadata: { suite: 'e2b-node-test' } }, limit: 2 })
    const sizes = []
    while (pages.hasNext) sizes.push((await pages.nextItems()).length)
    assert.deepEqual(sizes, [2, 1], 'Sandbox.list of 3 sandboxes with limit 2: page sizes')
  } finally {
    for (const o of others) await o.kill()
  }

  const metrics = await sb.getMetrics()
  const m = metrics[metrics.length - 1]
  assert.ok(m && m.cpuCount >= 1 && m.memUsed > 0 && m.memTotal >= m.memUsed && m.diskTotal >= m.diskUsed && m.timestamp instanceof Date,
    `getMetrics() answered ${JSON.stringify(metrics)}, want a sample with CPUs, memory and disk`)
}

async function commands (sb) {
  const r = await sb.commands.run('echo hi')
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ['hi\n', '', 0], 'commands.run("echo hi"): stdout, stderr, exit code')

  const failed = await sb.commands.run('echo oops >&2; exit 3').then(() => null, (e) => e)
  assert.ok(failed instanceof CommandExitError, `a command exiting 3 rejected with ${failed}, want a CommandExitError`)
  assert.deepEqual([failed.exitCode, failed.stderr], [3, 'oops\n'], 'CommandExitError of a command exiting 3: exit code, stderr')

  assert.equal((await sb.commands.run('echo $GREETING')).stdout, 'hello\n', "Sandbox.create's envs in a command")
  const env = await sb.commands.run('echo $GREETING $OTHER', { envs: { GREETING: 'hi', OTHER: 'there' } })
  assert.equal(env.stdout, 'hi there\n', "commands.run's envs over the sandbox's")
  assert.equal((await sb.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n', 'commands.run with cwd /tmp')

  const chunks = []
  const streamed = await sb.commands.run('echo 1; sleep 0.2; echo 2', { onStdout: (d) => chunks.push(d) })
  assert.equal(streamed.stdout, '1\n2\n', 'stdout of a command with onStdout')
  assert.equal(chunks.join(''), '1\n2\n', 'what onStdout saw')

  const bg = await sb.commands.run('sleep 600', { background: true })
  const listed = (await sb.commands.list()).map((p) => p.pid)
  assert.deepEqual(listed, [bg.pid], 'commands.list() while a background command runs')
  assert.equal(await bg.kill(), true, 'handle.kill() of a running background command')
  const killed = await bg.wait().then(() => null, (e) => e)
  assert.ok(killed instanceof CommandExitError, `wait() on a killed command resolved with ${killed}, want a CommandExitError`)
  assert.deepEqual(await sb.commands.list(), [], 'commands.list() after the kill')
  assert.equal(await sb.commands.kill(bg.pid), false, 'commands.kill() of an ended process')

  const cat = await sb.commands.run('cat', { background: true, stdin: true })
  await cat.sendStdin('hello\n')
  await sb.commands.sendStdin(cat.pid, 'world\n')
  await cat.closeStdin()
  const catted = await cat.wait()
  assert.deepEqual([catted.stdout, catted.exitCode], ['hello\nworld\n', 0], 'cat after sendStdin twice and closeStdin')

  const late = await sb.commands.run('echo first; sleep 1; echo second', { background: true })
  await late.disconnect()
  const again = await sb.commands.connect(late.pid)
  const rejoined = await again.wait()
  assert.equal(rejoined.exitCode, 0, 'exit code through commands.connect after disconnect')
  assert.match(rejoined.stdout, /second\n$/, 'output read through commands.connect after disconnect')
}

async function files (sb) {
  const dir = '/tmp/e2b-node-test'
  await sb.files.write(`${dir}/hello.txt`, 'round trip\n')
  assert.equal(await sb.files.read(`${dir}/hello.txt`), 'round trip\n', 'files.read of what files.write wrote')
  const bytes = await sb.files.read(`${dir}/hello.txt`, { format: 'bytes' })
  assert.equal(Buffer.from(bytes).toString(), 'round trip\n', "files.read with format 'bytes'")
  await sb.files.write([{ path: `${dir}/a.bin`, data: new Uint8Array([0, 1, 2, 255]) }, { path: `${dir}/b.txt`, data: 'b' }])
  assert.deepEqual([...(await sb.files.read(`${dir}/a.bin`, { format: 'bytes' }))], [0, 1, 2, 255], 'binary file written with others')
  const names = (await sb.files.list(dir)).map((e) => [e.name, e.type]).sort()
  assert.deepEqual(names, [['a.bin', 'file'], ['b.txt', 'file'], ['hello.txt', 'file']], 'files.list')
  assert.equal(await sb.files.exists(`${dir}/nope`), false, 'files.exists of a missing file')
  assert.equal((await sb.files.getInfo(`${dir}/hello.txt`)).size, 11, 'files.getInfo size')
  assert.deepEqual([await sb.files.makeDir(`${dir}/d`), await sb.files.makeDir(`${dir}/d`)], [true, false], 'files.makeDir twice')
  await sb.files.rename(`${dir}/d`, `${dir}/e`)
  await sb.files.remove(`${dir}/hello.txt`)
  const after = (await sb.files.list(dir)).map((e) => [e.name, e.type]).sort()
  assert.deepEqual(after, [['a.bin', 'file'], ['b.txt', 'file'], ['e', 'dir']], 'files.list after rename d->e and remove hello.txt')
  const missing = await sb.files.read(`${dir}/hello.txt`).then(() => null, (e) => e)
  assert.ok(missing instanceof NotFoundError, `files.read of a removed file rejected with ${missing}, want a NotFoundError`)
}

async function lifecycle (sb) {
  const listed = await Sandbox.list({ query: { metadata: { suite: 'e2b-node-test' } } }).nextItems()
  assert.deepEqual(listed.map((s) => [s.sandboxId, s.metadata.suite]), [[sb.sandboxId, 'e2b-node-test']], 'Sandbox.list by metadata')
  assert.equal(await sb.isRunning(), true, 'isRunning()')
  await sb.setTimeout(90_000)
  const info = await sb.getInfo()
  assert.equal(info.sandboxId, sb.sandboxId, 'getInfo() sandboxId')

  await sb.files.write('/root/state.txt', 'parent\n')
  const kids = await sb.fork({ count: 2 })
  assert.equal(kids.length, 2, 'fork({count: 2}) children')
  for (const kid of kids) {
    assert.ok(kid instanceof Sandbox, `a fork child is ${kid}, want a Sandbox`)
    assert.notEqual(kid.sandboxId, sb.sandboxId, 'a fork child has its own id')
    assert.equal(await kid.files.read('/root/state.txt'), 'parent\n', "a fork child reads the parent's file")
    assert.equal((await kid.commands.run('echo $GREETING')).stdout, 'hello\n', "a fork child keeps the parent's envs")
  }
  await kids[0].files.write('/root/state.txt', 'kid\n')
  assert.equal(await sb.files.read('/root/state.txt'), 'parent\n', "the parent's file after a child wrote its copy")
  for (const kid of kids) await kid.kill()

  assert.equal(await sb.pause(), true, 'pause() of a running sandbox')
  assert.equal((await Sandbox.getInfo(sb.sandboxId)).state, 'paused', 'getInfo().state after pause()')
  const resumed = await Sandbox.connect(sb.sandboxId, { timeoutMs: 60_000 })
  assert.equal(resumed.sandboxId, sb.sandboxId, 'Sandbox.connect of a paused sandbox keeps its id')
  assert.equal(await resumed.files.read('/root/state.txt'), 'parent\n', 'a file written before pause(), after connect')
  assert.equal((await resumed.commands.run('echo up')).stdout, 'up\n', 'a command after connect')

  const unknown = await Sandbox.getInfo('no-such-sandbox').then(() => null, (e) => e)
  assert.ok(unknown instanceof NotFoundError, `Sandbox.getInfo of an unknown id rejected with ${unknown}, want a NotFoundError`)
}

// autoPause: lifecycle onTimeout 'pause' with autoResume: the timeout
// pauses the sandbox, and a command resumes it with its file.
async function autoPause () {
  const sb = await Sandbox.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    assert.deepEqual((await sb.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true }, 'getInfo().lifecycle')
    await sb.files.write('/root/kept.txt', 'kept\n')
    await sb.setTimeout(1_000)
    let state = 'running'
    for (let i = 0; i < 600 && state !== 'paused'; i++) { // a minute at most: a stuck front end
      await new Promise((resolve) => setTimeout(resolve, 100))
      state = (await Sandbox.getInfo(sb.sandboxId)).state
    }
    assert.equal(state, 'paused', 'getInfo().state after the timeout with onTimeout pause')
    assert.equal((await sb.commands.run('cat /root/kept.txt')).stdout, 'kept\n', 'a command auto-resumes the sandbox')
    assert.equal((await Sandbox.getInfo(sb.sandboxId)).state, 'running', 'getInfo().state after the auto-resume')
  } finally {
    await sb.kill()
  }
}

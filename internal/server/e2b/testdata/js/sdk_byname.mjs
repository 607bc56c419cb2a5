// The e2b npm SDK reaching a sandbox URL by its name through the system's
// resolver (Node's dns.lookup: getaddrinfo, where nss-myhostname resolves
// every name under .localhost to loopback), as sdk_byname.py does with the
// Python SDK; byname_test.go checks the JSON it prints.
//   node sdk_byname.mjs urls PORT   the SDK at E2B_API_URL; fetch http://<getHost>:PORT
//   node sdk_byname.mjs domain      nothing but E2B_DOMAIN (<domain>:<port>), the key and
//                                   NODE_EXTRA_CA_CERTS; fetch https://<getHost>
import { lookup } from 'node:dns/promises'
import { Sandbox } from 'e2b'

const [mode, port] = process.argv.slice(2)
const out = {}
const sb = await Sandbox.create({ timeoutMs: 120_000 })
try {
  out.sandbox_id = sb.sandboxId
  out.envd_url = sb.envdApiUrl
  out.echo = (await sb.commands.run('echo by name')).stdout
  await sb.files.write('/tmp/www/hello.txt', 'hello by name')
  await sb.commands.run('cd /tmp/www && python3 -m http.server 8000', { background: true })
  await sb.commands.run('for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && exit 0; sleep 0.1; done; exit 1')
  const host = sb.getHost(8000)
  out.host = host
  const name = mode === 'domain' ? host.replace(/:\d+$/, '') : host
  out.addresses = [...new Set((await lookup(name, { all: true })).map(a => a.address))].sort()
  const url = mode === 'domain' ? `https://${host}/hello.txt` : `http://${host}:${port}/hello.txt`
  let r = await fetch(url)
  out.served = [r.status, await r.text()]
  r = await fetch(url.replace(sb.sandboxId, 'nosuchsandbox'))
  out.unknown = [r.status, (await r.json()).message]
} finally {
  await sb.kill()
}
console.log(JSON.stringify(out))

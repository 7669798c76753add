// The TypeScript MCP SDK's client (pinned in package.json) against one MCP server, with the
// SDK's own OAuth flow and its defaults: no `state` of our choosing, dynamic registration unless
// a client ID is given. Driven by tests/protocol/test_third_party_clients.py.
//
//   node ts_client.mjs --url https://localhost:P/mcp --callback http://127.0.0.1:Q/callback \
//     [--client-id ID] [--tool-args '{"action":"capabilities"}']
//
// The provider records the authorization URL instead of opening a browser, and listens on the
// loopback callback (RFC 8252 §7.3) as a native app would: whoever completes consent sends the
// browser (or a plain GET) there. Prints one JSON line per step on stdout:
//   {"step": "discover" | "register" | "client" | "authorize" | "callback" | "token" |
//            "tools/list" | "tools/call" | "refresh" | "after-refresh" | "done" | "error", ...}
// and exits 0 only when every step passed. The test CA comes from NODE_EXTRA_CA_CERTS.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    callback: { type: 'string' },
    'client-id': { type: 'string' },
    'tool-args': { type: 'string', default: '{"action":"capabilities"}' },
  },
  strict: true,
});
if (!args.url || !args.callback) throw new Error('ts_client.mjs: --url and --callback are required');

function emit(step, fields = {}) {
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);
}

// The loopback listener: resolves with the query of the first request to the callback path.
const callbackUrl = new URL(args.callback);
let delivered;
const arrived = new Promise((resolve) => { delivered = resolve; });
const listener = createServer((req, res) => {
  const got = new URL(req.url, callbackUrl);
  if (got.pathname !== callbackUrl.pathname) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/html' }).end('<p>ts_client: you may close this window</p>');
  delivered(got.searchParams);
});
await new Promise((resolve) => listener.listen(Number(callbackUrl.port), callbackUrl.hostname, resolve));

class RecordingProvider {
  constructor() {
    this.stored = { tokens: undefined, client: undefined, verifier: undefined, discovery: undefined };
    this.authorizationUrls = [];
    if (args['client-id']) {
      // A configured (native) client: nothing is registered, so saveClientInformation is absent.
      this.stored.client = { client_id: args['client-id'] };
      emit('client', { client_id: args['client-id'], how: 'configured' });
    } else {
      this.saveClientInformation = (info) => {
        this.stored.client = info;
        emit('register', { client_id: info.client_id });
      };
    }
  }
  get redirectUrl() { return args.callback; }
  get clientMetadata() {
    return {
      client_name: 'angelos tests (TypeScript SDK client)',
      redirect_uris: [args.callback],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.stored.client; }
  tokens() { return this.stored.tokens; }
  saveTokens(tokens) {
    const refresh = this.stored.tokens !== undefined;
    this.stored.tokens = tokens;
    emit(refresh ? 'refresh' : 'token', {
      token_type: tokens.token_type,
      expires_in: tokens.expires_in ?? null,
      scope: tokens.scope ?? null,
      has_refresh_token: Boolean(tokens.refresh_token),
    });
  }
  redirectToAuthorization(url) {
    this.authorizationUrls.push(url.href);
    emit('authorize', { url: url.href });
  }
  saveCodeVerifier(verifier) { this.stored.verifier = verifier; }
  codeVerifier() { return this.stored.verifier; }
  saveDiscoveryState(state) {
    if (this.stored.discovery === undefined) {
      const as = state.authorizationServerMetadata ?? {};
      emit('discover', {
        authorization_server: state.authorizationServerUrl,
        resource: state.resourceMetadata?.resource ?? null,
        registration_endpoint: as.registration_endpoint ?? null,
      });
    }
    this.stored.discovery = state;
  }
  discoveryState() { return this.stored.discovery; }
}

const provider = new RecordingProvider();
const timeout = setTimeout(() => {
  emit('error', { message: 'ts_client.mjs timed out' });
  process.exit(3);
}, Number(process.env.TS_CLIENT_TIMEOUT_MS ?? 30000));

function structured(result) {
  return { is_error: Boolean(result.isError), structured: result.structuredContent ?? null };
}

try {
  const url = new URL(args.url);
  let client = new Client({ name: 'angelos-ts-client', version: '1.0.0' });
  let transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  try {
    await client.connect(transport);
    throw new Error('the server accepted a connection without a token');
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  const query = await arrived;
  emit('callback', {
    has_code: query.has('code'),
    state: query.get('state'),
    iss: query.get('iss'),
    error: query.get('error'),
  });
  if (!query.has('code')) throw new Error(`the authorization failed: ${query.get('error')}`);
  await transport.finishAuth(query.get('code'));
  client = new Client({ name: 'angelos-ts-client', version: '1.0.0' });
  transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await client.connect(transport);
  const listed = await client.listTools();
  emit('tools/list', { names: listed.tools.map((t) => t.name).sort() });
  const toolArgs = JSON.parse(args['tool-args']);
  emit('tools/call', { name: 'mail_query', ...structured(await client.callTool({ name: 'mail_query', arguments: toolArgs })) });
  // Refresh: with tokens stored, the SDK's auth() redeems the refresh token.
  const before = provider.tokens().access_token;
  const outcome = await auth(provider, { serverUrl: url });
  if (outcome !== 'AUTHORIZED') throw new Error(`refresh gave ${outcome}`);
  if (provider.tokens().access_token === before) throw new Error('refresh kept the old access token');
  emit('after-refresh', { name: 'mail_query', ...structured(await client.callTool({ name: 'mail_query', arguments: toolArgs })) });
  await client.close();
  emit('done', { authorizations: provider.authorizationUrls.length });
  clearTimeout(timeout);
  listener.close();
  process.exit(0);
} catch (error) {
  emit('error', { message: String(error?.stack ?? error) });
  process.exit(1);
}

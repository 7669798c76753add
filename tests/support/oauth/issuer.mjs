// A real OAuth 2.1 authorization server for tests: panva's oidc-provider (pinned in
// package.json), served over HTTPS with the per-run test certificate on loopback.
//
//   node issuer.mjs --port P --host 127.0.0.1 [--host ::1] --cert server.crt --key server.key \
//     --ready FILE
//
// The issuer is https://localhost:P. It grants RFC 9068 JWT access tokens (ES256, typ at+jwt,
// 300 s) whose `aud` is the RFC 8707 `resource` the client asked for; only resources of the form
// https://localhost:<port>/mcp or https://127.0.0.1:<port>/mcp exist. Clients register
// themselves (RFC 7591, public clients allowed), PKCE S256 is required, the development login
// page takes any name and makes it the token's `sub`, and refresh tokens rotate on every use.
// Signing keys are made afresh at each start and live only in this process. FILE gets the
// issuer URL once every listener is up.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    host: { type: 'string', multiple: true },
    cert: { type: 'string' },
    key: { type: 'string' },
    ready: { type: 'string' },
  },
  strict: true,
});
for (const name of ['port', 'host', 'cert', 'key', 'ready']) {
  if (!args[name]) throw new Error(`issuer.mjs: --${name} is required`);
}
const port = Number(args.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error('issuer.mjs: bad --port');

const ISSUER = `https://localhost:${port}`;
const SCOPES = 'mail.read mail.write mail.send';
const ACCESS_TOKEN_TTL = 300;
const RESOURCE = /^https:\/\/(localhost|127\.0\.0\.1):([1-9][0-9]{0,4})\/mcp$/;

function isAcceptedResource(indicator) {
  const match = RESOURCE.exec(indicator);
  return match !== null && Number(match[2]) <= 65535;
}

function signingKey(alg, type, options) {
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), alg, use: 'sig', kid: randomBytes(8).toString('base64url') };
}

const provider = new Provider(ISSUER, {
  // ES256 signs the access tokens; RS256 stays available because it is the default for ID
  // tokens of clients that register without choosing one (an `openid` request).
  jwks: {
    keys: [
      signingKey('ES256', 'ec', { namedCurve: 'P-256' }),
      signingKey('RS256', 'rsa', { modulusLength: 2048 }),
    ],
  },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  // Listed so that registration accepts them in a client's `scope` (the mcp SDK sends one)
  // and discovery advertises them; tokens carry what the resource server entry grants.
  scopes: ['openid', 'offline_access', ...SCOPES.split(' ')],
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A client that names no resource at the token endpoint gets the one it was granted.
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (!isAcceptedResource(indicator)) throw new errors.InvalidTarget();
        return {
          audience: indicator,
          scope: SCOPES,
          accessTokenTTL: ACCESS_TOKEN_TTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  pkce: { required: () => true },
  // Every client allowed the refresh_token grant gets a refresh token, without offline_access.
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  ttl: {
    AccessToken: ACCESS_TOKEN_TTL,
    AuthorizationCode: 60,
    Grant: 3600,
    IdToken: 300,
    Interaction: 600,
    RefreshToken: 3600,
    Session: 3600,
  },
});

const tls = { cert: readFileSync(args.cert), key: readFileSync(args.key) };
const callback = provider.callback();
await Promise.all(args.host.map((host) => new Promise((resolve, reject) => {
  const server = createServer(tls, callback);
  server.once('error', reject);
  server.listen(port, host, resolve);
})));
writeFileSync(args.ready, `${ISSUER}\n`);
process.on('SIGTERM', () => process.exit(0));

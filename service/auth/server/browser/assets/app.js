"use strict";
// The passkey ceremonies of the Angelos sign-in, grants and send approval pages (no other
// script runs there).
const csrf = document.querySelector('meta[name="angelos-csrf"]')?.content ?? "";
const statusLine = document.getElementById("status");

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function created(credential) {
  const json = credential.toJSON();
  return {
    id: json.id,
    rawId: json.rawId,
    type: json.type,
    response: {
      clientDataJSON: json.response.clientDataJSON,
      attestationObject: json.response.attestationObject,
      transports: json.response.transports ?? [],
    },
  };
}

function asserted(credential) {
  const json = credential.toJSON();
  return {
    id: json.id,
    rawId: json.rawId,
    type: json.type,
    response: {
      clientDataJSON: json.response.clientDataJSON,
      authenticatorData: json.response.authenticatorData,
      signature: json.response.signature,
      userHandle: json.response.userHandle ?? null,
    },
  };
}

async function register(extra) {
  const options = await post("/oauth/passkeys/register/begin", extra);
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
  const credential = await navigator.credentials.create({publicKey});
  await post("/oauth/passkeys/register/finish", {...extra, credential: created(credential)});
  location.reload();
}

async function signIn(form) {
  const options = await post("/oauth/passkeys/login/begin", {});
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
  const credential = await navigator.credentials.get({publicKey});
  const answer = await post("/oauth/passkeys/login/finish", {credential: asserted(credential)});
  location.assign(form.dataset.next ?? answer.next);  // back to the page that asked, if one did
}

// One send: the challenge is bound to this preparation and to the text the page shows.
async function approve(form) {
  const path = `/oauth/approve/${form.dataset.pid}`;
  const options = await post(`${path}/begin`, {shown_sha256: form.dataset.shown});
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
  const credential = await navigator.credentials.get({publicKey});
  const answer = await post(path, {credential: asserted(credential)});
  location.assign(answer.next);
}

const actions = {
  "enrol": () => register({bootstrap_token: document.getElementById("bootstrap-token").value}),
  "add-passkey": () => register({}),
  "sign-in": signIn,
  "approve": approve,
};

for (const form of document.querySelectorAll("form[data-action]")) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    statusLine.textContent = "working";
    try {
      await actions[form.dataset.action](form);
      statusLine.textContent = "done";
    } catch (error) {
      statusLine.textContent = `failed: ${error.name}: ${error.message}`;
    }
  });
}

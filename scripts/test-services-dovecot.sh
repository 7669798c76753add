# Sourced by scripts/test-services: the Dovecot configurations (the ordinary mailbox and the
# Gmail-shaped XOAUTH2 one), the XOAUTH2 signing key, and starting the Gmail-shaped Dovecot.
# Uses $PYTHON, $ROOT and die() from test-services.

dovecot_identity() { # sets MAIL_USER, MAIL_GROUP and DOVECOT_EXTRA for a Dovecot config
  DOVECOT_EXTRA=""
  if [ "$(id -u)" = 0 ]; then
    # Dovecot refuses mail access as root: mail runs as nobody; the master stays root.
    MAIL_USER=nobody
    MAIL_GROUP="$(id -gn nobody)"
  else
    # Fully unprivileged: every Dovecot process runs as the invoking user.
    MAIL_USER="$(id -un)"
    MAIL_GROUP="$(id -gn)"
    DOVECOT_EXTRA="default_internal_user = $MAIL_USER
default_internal_group = $MAIL_GROUP
default_login_user = $MAIL_USER
service anvil {
  chroot =
}"
  fi
}

write_dovecot_conf() { # dir imaps_port lmtp_port ipv6
  local d="$1" mu mg extra addr="127.0.0.1"
  [ "$4" = 1 ] && addr="127.0.0.1, ::1"
  dovecot_identity
  mu="$MAIL_USER" mg="$MAIL_GROUP" extra="$DOVECOT_EXTRA"
  cat >"$d/dovecot/dovecot.conf" <<EOF
protocols = imap lmtp
listen = $addr
base_dir = $d/dovecot/run
state_dir = $d/dovecot/state
instance_name = mailtest-$2
log_path = $d/dovecot/dovecot.log
ssl = required
ssl_cert = <$d/tls/server.crt
ssl_key = <$d/tls/server.key
ssl_min_protocol = TLSv1.2
auth_mechanisms = plain login
# answer a wrong password at once (default 2 s) so auth-failure tests stay fast
auth_failure_delay = 0
mail_location = maildir:$d/dovecot/mail/%u:LAYOUT=fs
$extra
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $d/dovecot/users
}
userdb {
  driver = passwd-file
  args = username_format=%u $d/dovecot/users
  default_fields = uid=$mu gid=$mg home=$d/dovecot/mail/%u
}
namespace inbox {
  inbox = yes
  separator = /
  mailbox Drafts {
    special_use = \\Drafts
    auto = subscribe
  }
  mailbox Sent {
    special_use = \\Sent
    auto = subscribe
  }
  mailbox Trash {
    special_use = \\Trash
    auto = subscribe
  }
  mailbox Junk {
    special_use = \\Junk
    auto = subscribe
  }
  mailbox Archive {
    special_use = \\Archive
    auto = subscribe
  }
}
protocol imap {
  mail_max_userip_connections = 200
}
service imap-login {
  chroot =
  # one long-lived login process serving every client: fast logins, no per-connection fork
  service_count = 0
  process_min_avail = 1
  client_limit = 1000
  inet_listener imap {
    port = 0
  }
  inet_listener imaps {
    address = $addr
    port = $2
    ssl = yes
  }
}
service imap {
  process_limit = 1024
}
service lmtp {
  inet_listener lmtp {
    address = $addr
    port = $3
  }
}
EOF
  printf '%s\n' 'alice@example.test:{PLAIN}alicepw::::::' 'bob@example.test:{PLAIN}bobpw::::::' \
    "$GRAPH_USER:{PLAIN}$GRAPH_PASSWORD::::::" >"$d/dovecot/users"
  if [ "$(id -u)" = 0 ]; then chown -R "$mu:$mg" "$d/dovecot/mail"; fi
}

make_signing_key() { # dir: the XOAUTH2 rig's EC P-256 key pair; sets XOAUTH2_KID
  local x="$1/xoauth2"
  XOAUTH2_KID="rig-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  # Dovecot's local validation looks a key up as <azp or "default">/<alg>/<kid> in its dict.
  mkdir -p "$x/keys/default/ES256"
  {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$x/signing.key" &&
      openssl pkey -in "$x/signing.key" -pubout -out "$x/keys/default/ES256/$XOAUTH2_KID"
  } >"$x/openssl.log" 2>&1 || { cat "$x/openssl.log" >&2; die "could not create the signing key"; }
  chmod 600 "$x/signing.key"
  chmod 644 "$x/keys/default/ES256/$XOAUTH2_KID"
}

write_gmail_dovecot_conf() { # dir imaps_port ipv6 issuer
  local d="$1" g="$1/gmail" addr="127.0.0.1"
  [ "$3" = 1 ] && addr="127.0.0.1, ::1"
  dovecot_identity
  cat >"$g/oauth2.conf.ext" <<EOF
introspection_mode = local
local_validation_key_dict = fs:posix:prefix=$d/xoauth2/keys/
username_attribute = sub
issuers = $4
EOF
  cat >"$g/dovecot.conf" <<EOF
protocols = imap
listen = $addr
base_dir = $g/run
state_dir = $g/state
instance_name = mailtest-gmail-$2
log_path = $g/dovecot.log
ssl = required
ssl_cert = <$d/tls/server.crt
ssl_key = <$d/tls/server.key
ssl_min_protocol = TLSv1.2
# XOAUTH2 and OAUTHBEARER check the bearer JWT (passdb oauth2); PLAIN is for the rig alone.
auth_mechanisms = plain xoauth2 oauthbearer
auth_failure_delay = 0
auth_verbose = yes
# Dovecot's way to add a capability: the one that tells a client it talks to Gmail.
imap_capability = +X-GM-EXT-1
mail_location = maildir:$g/mail/%u:LAYOUT=fs
$DOVECOT_EXTRA
passdb {
  driver = oauth2
  mechanisms = xoauth2 oauthbearer
  args = $g/oauth2.conf.ext
}
passdb {
  driver = passwd-file
  mechanisms = plain
  args = scheme=PLAIN username_format=%u $g/users
}
userdb {
  driver = passwd-file
  args = username_format=%u $g/users
  default_fields = uid=$MAIL_USER gid=$MAIL_GROUP home=$g/mail/%u
}
namespace inbox {
  inbox = yes
  separator = /
  # Gmail's special folders and their roles; there is no \\Archive folder.
  mailbox "[Gmail]/Sent Mail" {
    special_use = \\Sent
    auto = subscribe
  }
  mailbox "[Gmail]/All Mail" {
    special_use = \\All
    auto = subscribe
  }
  mailbox "[Gmail]/Drafts" {
    special_use = \\Drafts
    auto = subscribe
  }
  mailbox "[Gmail]/Trash" {
    special_use = \\Trash
    auto = subscribe
  }
  mailbox "[Gmail]/Spam" {
    special_use = \\Junk
    auto = subscribe
  }
  mailbox "[Gmail]/Starred" {
    special_use = \\Flagged
    auto = subscribe
  }
}
protocol imap {
  mail_max_userip_connections = 200
}
service imap-login {
  chroot =
  # one long-lived login process serving every client, started by the first client rather
  # than with the master (see start_gmail_dovecot)
  service_count = 0
  client_limit = 1000
  inet_listener imap {
    port = 0
  }
  inet_listener imaps {
    address = $addr
    port = $2
    ssl = yes
  }
}
service imap {
  process_limit = 1024
}
EOF
  printf '%s\n' "$GMAIL_USER:{PLAIN}$GMAIL_PASSWORD::::::" >"$g/users"
  if [ "$(id -u)" = 0 ]; then chown -R "$MAIL_USER:$MAIL_GROUP" "$g/mail"; fi
}

start_gmail_dovecot() { # dir
  local g="$1/gmail"
  dovecot -c "$g/dovecot.conf" </dev/null >"$g/start.log" 2>&1 || return 1
  # After a failed login Dovecot delays every later login from that address by 2-15 s (not
  # configurable), which would slow each refused-token test and the ones after it. Its auth
  # process skips that delay when, as it starts, it finds no socket to reach anvil's penalty
  # table through. The master has made its sockets by now, and auth starts with the first
  # login (no login process runs before a client connects).
  rm -f "$g/run/anvil-auth-penalty"
}

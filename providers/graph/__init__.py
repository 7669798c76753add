"""Microsoft Graph behind the Mailbox protocol: delegated access to one `/me` mailbox over REST.

Plain aiohttp, not msgraph-sdk: the SDK's retry middleware repeats POSTs on 429, 503 and 504,
which would send a message twice, and its transport cannot be held to the pinned host and the
vetted resolver. Every request goes to https://graph.microsoft.com/v1.0/me and nowhere else.
"""

"""The test owner's credentials, shared by the fixtures that create and sign in that owner."""

OWNER_USERNAME = "owner"
OWNER_PASSWORD = "a-long-owner-passphrase-42"

"""Who may ask what: RocketMQ ACL signatures on the remoting port, accounts and HTTP tokens from
one reloadable file, trusted-proxy address rules. See docs/security.md."""

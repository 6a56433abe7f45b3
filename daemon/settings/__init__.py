"""Where things live and what the user chose: config, platform paths, secrets, vault and mail-folder discovery, and the name/root policy."""

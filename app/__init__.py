"""Convites: send invites by e-mail and always see the truth about each one."""

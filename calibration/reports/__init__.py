"""Reports of what the other rooms compute, with their HTML beside them.

The agreement report (:mod:`.report`, its page :mod:`.html`) and the audit's page
(:mod:`.audit_html`). Reports import what they show; nothing imports a report.
"""

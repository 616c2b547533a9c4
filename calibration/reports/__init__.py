"""Reports of what the other rooms compute, with their HTML beside them.

The agreement report (`.report`, its page `.html`) and the audit's page
(`.audit_html`). Reports import what they show; nothing imports a report.
"""

"""A second synthetic world for risk suggestions, built apart from the others (stdlib only).

Other domains (people operations, infrastructure, treasury, clinics, warehouses, classrooms,
community sites, source hosting), other verbs, and other naming conventions: camelCase,
noun-first (``ledgerEntryReverse``), kebab-case and dotted namespaces. Its words were chosen
to differ from Contract2Tool's and from ``demo/synthetic_world.py``, not from the risk
lexicon's seeds, and the labels follow one written policy, decided before any suggestion was
scored:

- ``high``: the call destroys or irreversibly voids something, moves money, sends something
  outside the organisation, makes something public, or grants or removes access;
- ``medium``: it creates or changes the organisation's own records;
- ``low``: it only reads, computes or previews.
"""

from __future__ import annotations

from typing import Any

# name, description, produces, permissions, risk
TOOLS: list[tuple[str, str, list[str], list[str], str]] = [
    # people operations
    ("people.employeeDirectory", "Look through staff profiles by team or office.",
     ["staff_profile"], [], "low"),
    ("people.leaveBalance", "Tell how many days of leave a person has left.",
     ["leave_days"], [], "low"),
    ("people.onboardHire", "Register a new hire in the staff records.",
     ["hire_record"], [], "medium"),
    ("people.contractTerminate", "End a person's employment contract and close their records.",
     ["contract_ended"], [], "high"),
    ("people.payslipDisburse", "Disburse this month's salary to an employee's bank account.",
     ["salary_disbursed"], [], "high"),
    ("people.badgeRevoke", "Revoke a person's building badge and door access.",
     ["badge_revoked"], [], "high"),
    ("people.reviewNote", "Append a note to a performance review.", ["review_note"], [],
     "medium"),
    # infrastructure
    ("infra.clusterHealth", "Report node status and load for a cluster.", ["cluster_status"],
     [], "low"),
    ("infra.diskWipe", "Wipe every partition on a machine's disk.", ["disk_blank"], [],
     "high"),
    ("infra.snapshot-prune", "Obliterate backup snapshots older than a given age.",
     ["snapshots_gone"], [], "high"),
    ("infra.vmProvision", "Provision a virtual machine in the private cloud.", ["vm_handle"],
     [], "medium"),
    ("infra.logTail", "Stream the last lines of a service log.", ["log_lines"], [], "low"),
    ("infra.tableTruncate", "Empty a database table, keeping its schema.",
     ["table_emptied"], [], "high"),
    ("infra.roleElevate", "Give a user administrator rights on a project.", ["role_given"],
     ["admin"], "high"),
    ("infra.configTweak", "Adjust a setting in a service's configuration.",
     ["setting_adjusted"], [], "medium"),
    ("infra.dnsResolve", "Resolve a host name to its addresses.", ["host_addresses"], [],
     "low"),
    # treasury
    ("treasury.ledgerEntryReverse", "Reverse a ledger entry permanently.", ["entry_reversed"],
     [], "high"),
    ("treasury.vendorRemit", "Remit an outstanding amount to a supplier.", ["remittance_ref"],
     [], "high"),
    ("treasury.fxQuote", "Quote the rate between two currencies.", ["fx_rate"], [], "low"),
    ("treasury.expenseReimburse", "Reimburse an employee's approved expense claim.",
     ["reimbursement_ref"], [], "high"),
    ("treasury.budgetVariance", "Tabulate spending against budget per department.",
     ["variance_table"], [], "low"),
    ("treasury.payoutBatch", "Queue a batch of outgoing bank transfers.", ["batch_ref"],
     ["payments"], "high"),
    # clinic
    ("clinic.chartView", "Show a patient's chart.", ["chart"], [], "low"),
    ("clinic.prescriptionDraft", "Draft a prescription for a doctor to sign later.",
     ["prescription_draft"], [], "medium"),
    ("clinic.recordShred", "Shred a patient's archived paper records.", ["records_shredded"],
     [], "high"),
    ("clinic.labResultsFax", "Fax lab results to an outside clinic.", ["fax_receipt"], [],
     "high"),
    ("clinic.slotAvailability", "Tell which appointment slots are free.", ["free_slots"], [],
     "low"),
    ("clinic.visitBook", "Book a visit in the clinic's own diary.", ["visit_booked"], [],
     "medium"),
    # warehouse
    ("warehouse.stockLevel", "Count units of an item on hand.", ["units_on_hand"], [], "low"),
    ("warehouse.stock-writeoff", "Write off damaged stock so it leaves the books for good.",
     ["stock_written_off"], [], "high"),
    ("warehouse.palletRelocate", "Relocate a pallet to another aisle.", ["pallet_moved"], [],
     "medium"),
    ("warehouse.shipmentDispatch", "Dispatch a shipment to a customer's address.",
     ["shipment_dispatched"], [], "high"),
    ("warehouse.binLabelPrint", "Print a label for a storage bin.", ["label_printed"], [],
     "low"),
    # classroom
    ("classroom.gradebookExport", "Export the gradebook to the district's outside portal.",
     ["gradebook_exported"], [], "high"),
    ("classroom.rosterView", "List the pupils enrolled in a class.", ["roster"], [], "low"),
    ("classroom.assignmentPost", "Post an assignment for the class to see.",
     ["assignment_posted"], [], "medium"),
    ("classroom.gradeAmend", "Amend a pupil's grade.", ["grade_amended"], [], "medium"),
    ("classroom.submissionPurge", "Purge all submissions of a past term.",
     ["submissions_purged"], [], "high"),
    # community site
    ("community.threadPreview", "Preview how a thread will look.", ["thread_preview"], [],
     "low"),
    ("community.postPublish", "Make a drafted post visible to everyone on the internet.",
     ["post_public"], [], "high"),
    ("community.memberBan", "Ban a member and erase their posts.", ["member_banned"], [],
     "high"),
    ("community.announcementBroadcast", "Broadcast an announcement to all subscribers.",
     ["announcement_broadcast"], [], "high"),
    ("community.tagSuggest", "Suggest tags for a post.", ["suggested_tags"], [], "low"),
    # source hosting
    ("repo.branchCompare", "Diff two branches.", ["branch_diff"], [], "low"),
    ("repo.branchDestroy", "Destroy a branch and its history.", ["branch_removed"], [],
     "high"),
    ("repo.collaboratorAdd", "Authorise an outside collaborator to push to a repository.",
     ["collaborator_added"], [], "high"),
    ("repo.visibilityFlip", "Flip a private repository to public.", ["repo_visibility"], [],
     "high"),
    ("repo.ticketRaise", "Raise an issue in the tracker.", ["issue_number"], [], "medium"),
    ("repo.secretRotate", "Rotate a deploy key, invalidating the old one.", ["key_rotated"],
     [], "high"),
    ("repo.ciStatus", "Tell whether the last build passed.", ["build_status"], [], "low"),
    # danger only in effects or permissions
    ("billing.reconcile", "Reconcile an account.", ["funds_withdrawn"], [], "high"),
    ("sync.mirror", "Mirror a folder.", ["files_erased"], [], "high"),
    ("ops.housekeeping", "Routine housekeeping job.", ["job_report"], ["delete"], "high"),
    ("notify.digest", "Prepare the weekly digest.", ["digest_text"], ["send"], "high"),
]  # fmt: skip


def labelled_tools() -> list[dict[str, Any]]:
    return [
        {"name": name, "description": description, "produces": produces,
         "permissions": permissions, "risk": risk}
        for name, description, produces, permissions, risk in TOOLS
    ]  # fmt: skip

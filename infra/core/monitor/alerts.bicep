// Log search alert rules on the app's telemetry events (oncegate/telemetry.py), each query in alerts/*.kql:
// claims needing attention, conflicts open too long, 503s, and a key secret the store does not know. The
// attention watch (a timer function) reports what waits on its schedule (every 15 minutes unless changed); the
// attention rule reads its last run.
// With alertEmail, an action group mails every alert; without, the rules fire in the portal only.

@description('Name of the Application Insights component the rules query.')
param applicationInsightsName string

@description('Region of the alert rules.')
param location string

@description('Tags of the alert rules and the action group.')
param tags object

@description('E-mail address every alert goes to. Empty: no action group; the alerts show in the portal only.')
param alertEmail string

@minValue(1)
@maxValue(720)
@description('Hours a conflict may stay open before its alert fires.')
param conflictAlertHours int

@minValue(1)
@description('503 answers in 15 minutes beyond which the 503 alert fires.')
param unavailableAlertThreshold int

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: 'ag-oncegate-${applicationInsightsName}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'OnceGate'
    enabled: true
    emailReceivers: [
      {
        name: 'operators'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var actions = {
  actionGroups: empty(alertEmail) ? [] : [
    actionGroup.id
  ]
}

// The attention query reads the last run of the watch (top 1 by timestamp), however long ago it ran within
// the query range. Any schedule that runs at least daily (ONCEGATE_ATTENTION_SCHEDULE, and main.bicep refuses
// a slower one) keeps the alert fired between runs while claims wait. A 30-minute window held no run of an
// hourly schedule for half of each hour: the alert resolved and fired again at every run.
resource attentionAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'oncegate-attention-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'OnceGate: claims need attention'
    description: 'The attention watch found claims that wait for a person: docs/operations.md, Claims needing attention.'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT30M'
    // Two days, the most a log search alert reads: the last run of any schedule main.bicep accepts.
    overrideQueryTimeRange: 'P2D'
    criteria: {
      allOf: [
        {
          query: loadTextContent('alerts/attention.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}

resource conflictAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'oncegate-open-conflicts-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'OnceGate: conflicts open too long'
    description: 'A conflict has been open longer than ${conflictAlertHours} hours: docs/operations.md, Open conflicts.'
    severity: 3
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT1H'
    windowSize: 'PT1H'
    criteria: {
      allOf: [
        {
          query: replace(loadTextContent('alerts/open-conflicts.kql'), '{conflictAlertHours}', string(conflictAlertHours))
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}

resource unavailableAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'oncegate-unavailable-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'OnceGate: 503s'
    description: 'More than ${unavailableAlertThreshold} answers in 15 minutes were 503: docs/operations.md, The alerts.'
    severity: 1
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('alerts/unavailable.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: unavailableAlertThreshold
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}

resource targetAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'oncegate-target-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'OnceGate: a target answers 5xx or times out'
    description: 'A Perform once call got a 5xx, timed out or broke: its claim is in doubt until a look-up settles it. docs/operations.md, The alerts.'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('alerts/target.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}

resource keySecretAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'oncegate-key-secret-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'OnceGate: the key secret does not fit the store'
    description: 'The app answers 503 not_configured naming ONCEGATE_KEY_SECRET and claims nothing: docs/operations.md, The key secret.'
    severity: 0
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('alerts/key-secret.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}
